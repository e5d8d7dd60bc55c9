//===- AttentionDecompositions.cpp - Sparse attention's kernel-level ops --===//
//
// What --pisa-decompose-to-kernels makes of pisa.sparse_attention (one
// kernel op) and pisa.sparse_attention_grad (the query kernel op, then the
// key kernel op), through their KernelLoweringOpInterface models
// (KernelLowering.cpp); the other ops' are in KernelDecompositions.cpp.
//
//===----------------------------------------------------------------------===//

#include "../Decompose.h"
#include "../Kernels/KernelBuilder.h"

#include "../../Common/LoopBuilders.h"

#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaDialect.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

/// The sizes of sparse attention's operands the verifier could not compare
/// (dynamic), as host assertions, since a mismatch would read out of
/// bounds; the selection's entries are device data the kernels check.
static void requireAttentionSizes(ImplicitLocOpBuilder &b, StringRef opName,
                                  Value queries, Value keys, Value values,
                                  Value selection, bool tm) {
  const int64_t heads = headDimIndex(tm), tokens = tokenDimIndex(tm);
  auto dynamic = [](Value v, int64_t dim) {
    return cast<ShapedType>(v.getType()).isDynamicDim(dim);
  };
  auto requireSame = [&](Value x, int64_t xDim, Value y, int64_t yDim,
                         StringRef what) {
    requireSameExtent(b, opName, x, xDim, y, yDim, what);
  };
  requireSame(keys, 0, queries, 0, "the keys' batch differs from the queries'");
  requireSame(values, 0, queries, 0,
              "the values' batch differs from the queries'");
  requireSame(values, tokens, keys, tokens,
              "the values' N differs from the keys'");
  requireSame(selection, 0, queries, 0,
              "the selection's batch differs from the queries'");
  requireSame(selection, tokens, queries, tokens,
              "the selection's Nq differs from the queries'");
  Value batch = dimOf(b, queries, 0), numQueries = dimOf(b, queries, tokens);
  if (dynamic(queries, 0))
    requireGroupsFitGrid(b, opName, batch,
                         cast<ShapedType>(keys.getType()).getDimSize(heads));
  if (dynamic(queries, tokens))
    requireAtRuntime(b,
                     cmp(b, arith::CmpIPredicate::ule, numQueries,
                         indexConst(b, kMaxGPUKeys)),
                     opName + ": Nq is above the GPU limit of " +
                         std::to_string(kMaxGPUKeys) + " (grid x)");
}

/// sparse_attention: one kernel op.
void mlir::pisa::detail::decompose(RewriterBase &rewriter,
                                   SparseAttentionOp op) {
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  Value queries = op.getQueries(), keys = op.getKeys();
  Value values = op.getValues(), selection = op.getSelection();
  const bool tm = op.getTokenMajor();
  const int64_t tokens = tokenDimIndex(tm);
  requireAttentionSizes(b, "pisa.sparse_attention", queries, keys, values,
                        selection, tm);
  Value batch = dimOf(b, queries, 0), numQueries = dimOf(b, queries, tokens);
  RankedTensorType outType = op.getOutput().getType();
  RankedTensorType lseType = op.getLse().getType();
  // Dynamic sizes are B and Nq only: [B, Nq, Hq, dv] / [B, Nq, Hq] when
  // token-major.
  SmallVector<Value> outSizes(4, Value()), lseSizes(3, Value());
  outSizes[0] = lseSizes[0] = batch;
  outSizes[tokens] = lseSizes[tokens] = numQueries;
  requireResultSizes(b, "pisa.sparse_attention", outType, outSizes, "output");
  requireResultSizes(b, "pisa.sparse_attention", lseType, lseSizes, "lse");
  Value outInit = emptyLike(b, outType, outSizes);
  Value lseInit = emptyLike(b, lseType, lseSizes);
  auto kernel = SparseAttentionKernelOp::create(
      b, TypeRange{outType, lseType}, queries, keys, values, selection,
      op.getQueryOffset(), outInit, lseInit, op.getBlockSize(),
      llvm::APFloat(op.getScaleOrDefault()), tm);
  rewriter.replaceOp(op, kernel.getResults());
}

/// sparse_attention_grad: the query kernel op (dq and D), then the key
/// kernel op (dk and dv, with its query-bit scratch).
void mlir::pisa::detail::decompose(RewriterBase &rewriter,
                                   SparseAttentionGradOp op) {
  static constexpr StringLiteral kName = "pisa.sparse_attention_grad";
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  Value queries = op.getQueries(), keys = op.getKeys();
  Value values = op.getValues(), selection = op.getSelection();
  const bool tm = op.getTokenMajor();
  const int64_t tokens = tokenDimIndex(tm);
  requireAttentionSizes(b, kName, queries, keys, values, selection, tm);
  for (auto [operand, what] :
       {std::pair<Value, StringRef>{op.getOutput(), "the output's"},
        {op.getGradOutput(), "dO's"}}) {
    requireSameExtent(b, kName, operand, 0, queries, 0,
                      (Twine(what) + " batch differs from the queries'").str());
    requireSameExtent(b, kName, operand, tokens, queries, tokens,
                      (Twine(what) + " Nq differs from the queries'").str());
  }
  requireSameExtent(b, kName, op.getLse(), 0, queries, 0,
                    "the lse's batch differs from the queries'");
  requireSameExtent(b, kName, op.getLse(), tm ? 1 : 2, queries, tokens,
                    "the lse's Nq differs from the queries'");
  Value batch = dimOf(b, queries, 0), numQueries = dimOf(b, queries, tokens);
  Value numKeys = dimOf(b, keys, tokens);
  auto resultInit = [&](Value result, Value tokenCount) {
    auto type = cast<RankedTensorType>(result.getType());
    SmallVector<Value> sizes(4, Value());
    sizes[0] = batch;
    sizes[tokens] = tokenCount;
    requireResultSizes(b, kName, type, sizes, "gradient");
    return emptyLike(b, type, sizes);
  };
  Value dqInit = resultInit(op.getGradQueries(), numQueries);
  Value dkInit = resultInit(op.getGradKeys(), numKeys);
  Value dvInit = resultInit(op.getGradValues(), numKeys);
  const int64_t hq =
      cast<ShapedType>(queries.getType()).getDimSize(headDimIndex(tm));
  const int64_t hkv =
      cast<ShapedType>(keys.getType()).getDimSize(headDimIndex(tm));
  Value deltaInit = empty(b, {ShapedType::kDynamic, hq, ShapedType::kDynamic},
                          b.getF32Type(), {batch, Value(), numQueries});
  Value numBlocks =
      arith::CeilDivUIOp::create(b, numKeys, indexConst(b, op.getBlockSize()));
  // A row's bit words and its segment counter.
  Value rowWords = arith::AddIOp::create(
      b, arith::CeilDivUIOp::create(b, numQueries, indexConst(b, 32)),
      indexConst(b, 1));
  constexpr int64_t dyn = ShapedType::kDynamic;
  Value bitsInit = empty(b, {dyn, hkv, dyn, dyn}, b.getI32Type(),
                         {batch, Value(), numBlocks, rowWords});
  const int64_t sumWidth = cast<ShapedType>(keys.getType()).getDimSize(3) +
                           cast<ShapedType>(values.getType()).getDimSize(3);
  Value sumsInit = empty(b, {dyn, hkv, dyn, sumWidth}, b.getF32Type(),
                         {batch, Value(), numKeys, Value()});
  llvm::APFloat scale(op.getScaleOrDefault());
  auto queryHalf = SparseAttentionGradQueriesKernelOp::create(
      b, TypeRange{dqInit.getType(), deltaInit.getType()}, queries, keys,
      values, selection, op.getQueryOffset(), op.getOutput(), op.getLse(),
      op.getGradOutput(), dqInit, deltaInit, op.getBlockSize(), scale, tm);
  auto keyHalf = SparseAttentionGradKeysKernelOp::create(
      b,
      TypeRange{dkInit.getType(), dvInit.getType(), bitsInit.getType(),
                sumsInit.getType()},
      queries, keys, values, selection, op.getQueryOffset(), op.getLse(),
      queryHalf.getResult(1), op.getGradOutput(), dkInit, dvInit, bitsInit,
      sumsInit, op.getBlockSize(), scale, tm);
  rewriter.replaceOp(
      op, {queryHalf.getResult(0), keyHalf.getResult(0), keyHalf.getResult(1)});
}
