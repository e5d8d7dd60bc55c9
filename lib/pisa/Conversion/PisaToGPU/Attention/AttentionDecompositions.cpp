//===- AttentionDecompositions.cpp - Sparse attention's kernel-level ops --===//
//
// What --pisa-decompose-to-kernels makes of pisa.sparse_attention (one
// kernel op) and pisa.sparse_attention_grad (the query kernel op, then the
// key kernel op), through their KernelLoweringOpInterface models
// (KernelLowering.cpp); the other ops' are in KernelDecompositions.cpp.
//
//===----------------------------------------------------------------------===//

#include "AttentionGrad.h"

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
      op.getQueryOffset(), Value(), Value(), outInit, lseInit,
      op.getBlockSize(), llvm::APFloat(op.getScaleOrDefault()), tm);
  rewriter.replaceOp(op, kernel.getResults());
}

/// Packed sparse attention's queries, keys, values and selection as the
/// batch-of-one views the kernel ops take, after the host assertions on
/// the sizes the verifier could not compare (dynamic), made on the packed
/// tensors themselves (their extents are the caller's or the producing
/// ops', which the entry point's checks can compute before a call).
struct PackedAttentionViews {
  Value queries, keys, values, selection;
};
static PackedAttentionViews viewPackedAttention(ImplicitLocOpBuilder &b,
                                                StringRef opName, Value queries,
                                                Value keys, Value values,
                                                Value selection) {
  requireSameExtent(b, opName, values, 0, keys, 0,
                    "the values' Tk differs from the keys'");
  requireSameExtent(b, opName, selection, 0, queries, 0,
                    "the selection's Tq differs from the queries'");
  if (cast<ShapedType>(queries.getType()).isDynamicDim(0))
    requireAtRuntime(b,
                     cmp(b, arith::CmpIPredicate::ule, dimOf(b, queries, 0),
                         indexConst(b, kMaxGPUKeys)),
                     opName + ": Tq is above the GPU limit of " +
                         std::to_string(kMaxGPUKeys) + " (grid x)");
  // cu_seqlens are i32, so a batch that keeps the rules has Tk below 2^31;
  // refusing more before a call also bounds the scratch the backward
  // sizes from Tk, Tq and B.
  if (cast<ShapedType>(keys.getType()).isDynamicDim(0))
    requireAtRuntime(b,
                     cmp(b, arith::CmpIPredicate::ule, dimOf(b, keys, 0),
                         indexConst(b, kMaxGPUKeys)),
                     opName + ": Tk is above " + std::to_string(kMaxGPUKeys) +
                         " (cu_seqlens are i32)");
  return {asBatchOfOne(b, queries), asBatchOfOne(b, keys),
          asBatchOfOne(b, values), asBatchOfOne(b, selection)};
}

/// The key kernel op's query lists: the index [B, Hkv, rows, Q + 4] and
/// the lists [B, Hkv, Nq, K] (i32 scratch), Q = queryListChunks(Nq).
struct QueryListInits {
  Value index, list;
};
static QueryListInits queryListInits(ImplicitLocOpBuilder &b, int64_t hkv,
                                     Value batch, Value rows, Value numQueries,
                                     int64_t topK) {
  constexpr int64_t dyn = ShapedType::kDynamic;
  Value columns = arith::AddIOp::create(b, queryListChunks(b, numQueries),
                                        indexConst(b, kIndexExtraColumns));
  return {empty(b, {dyn, hkv, dyn, dyn}, b.getI32Type(),
                {batch, Value(), rows, columns}),
          empty(b, {dyn, hkv, dyn, topK}, b.getI32Type(),
                {batch, Value(), numQueries, Value()})};
}

/// K, the selection's static last dim.
static int64_t selectionTopK(Value selection) {
  return cast<ShapedType>(selection.getType()).getShape().back();
}

/// A packed [T, X] tensor (the lse) as [1, T, X], and back.
static Value rowsAsBatchOfOne(ImplicitLocOpBuilder &b, Value packed) {
  auto type = cast<RankedTensorType>(packed.getType());
  ArrayRef<int64_t> s = type.getShape();
  auto expanded = RankedTensorType::get({1, s[0], s[1]}, type.getElementType());
  return tensor::ExpandShapeOp::create(
      b, expanded, packed, {{0, 1}, {2}},
      {b.getIndexAttr(1), dimOf(b, packed, 0), b.getIndexAttr(s[1])});
}

/// sparse_attention_varlen: the kernel op of sparse_attention on the packed
/// batch seen as a token-major batch of one, given cu_seqlens (each query
/// row finds its sequence on the device).
void mlir::pisa::detail::decompose(RewriterBase &rewriter,
                                   SparseAttentionVarlenOp op) {
  static constexpr StringLiteral kName = "pisa.sparse_attention_varlen";
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  requireVarlenSizes(b, kName, "cu_seqlens_k", op.getCuSeqlensK(), op.getKeys(),
                     op.getBlockSize(), op.getCuSeqlensQ(), op.getQueries());
  PackedAttentionViews views =
      viewPackedAttention(b, kName, op.getQueries(), op.getKeys(),
                          op.getValues(), op.getSelection());
  Value queries = views.queries, keys = views.keys, values = views.values,
        selection = views.selection;
  Value numQueryRows = dimOf(b, op.getQueries(), 0);
  RankedTensorType outType = op.getOutput().getType();
  RankedTensorType lseType = op.getLse().getType();
  requireResultSizes(b, kName, outType, {numQueryRows, Value(), Value()},
                     "output");
  requireResultSizes(b, kName, lseType, {numQueryRows, Value()}, "lse");
  Value outInit =
      asBatchOfOne(b, emptyLike(b, outType, {numQueryRows, Value(), Value()}));
  Value lseInit =
      rowsAsBatchOfOne(b, emptyLike(b, lseType, {numQueryRows, Value()}));
  auto kernel = SparseAttentionKernelOp::create(
      b, TypeRange{outInit.getType(), lseInit.getType()}, queries, keys, values,
      selection, indexConst(b, 0), op.getCuSeqlensQ(), op.getCuSeqlensK(),
      outInit, lseInit, op.getBlockSize(),
      llvm::APFloat(op.getScaleOrDefault()), /*token_major=*/true);
  Value out = tensor::CollapseShapeOp::create(
      b, outType, kernel.getResult(0),
      ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}});
  Value lse = tensor::CollapseShapeOp::create(
      b, lseType, kernel.getResult(1),
      ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  rewriter.replaceOp(op, {out, lse});
}

/// sparse_attention_grad_varlen: the backward's two kernel ops on the
/// packed batch seen as a token-major batch of one, given cu_seqlens; the
/// query index has a row per block slot of the batch (sequence s's blocks
/// from floor(cu_k[s] / C) + s: floor(Tk / C) + B rows).
void mlir::pisa::detail::decompose(RewriterBase &rewriter,
                                   SparseAttentionGradVarlenOp op) {
  static constexpr StringLiteral kName = "pisa.sparse_attention_grad_varlen";
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  const int64_t c = op.getBlockSize();
  requireVarlenSizes(b, kName, "cu_seqlens_k", op.getCuSeqlensK(), op.getKeys(),
                     c, op.getCuSeqlensQ(), op.getQueries());
  PackedAttentionViews views =
      viewPackedAttention(b, kName, op.getQueries(), op.getKeys(),
                          op.getValues(), op.getSelection());
  Value queries = views.queries, keys = views.keys, values = views.values,
        selection = views.selection;
  for (auto [operand, what] :
       {std::pair<Value, StringRef>{op.getOutput(), "the output's"},
        {op.getGradOutput(), "dO's"},
        {op.getLse(), "the lse's"}})
    requireSameExtent(b, kName, operand, 0, op.getQueries(), 0,
                      (Twine(what) + " Tq differs from the queries'").str());
  Value numQueryRows = dimOf(b, op.getQueries(), 0);
  Value numKeyRows = dimOf(b, op.getKeys(), 0);
  auto resultInit = [&](Value result, Value rows) {
    auto type = cast<RankedTensorType>(result.getType());
    requireResultSizes(b, kName, type, {rows, Value(), Value()}, "gradient");
    return asBatchOfOne(b, emptyLike(b, type, {rows, Value(), Value()}));
  };
  // dv's rows are the values' (equal to the keys', checked above): dk's and
  // dv's destinations of one type stay two tensors, so that each result is
  // its own buffer.
  Value dqInit = resultInit(op.getGradQueries(), numQueryRows);
  Value dkInit = resultInit(op.getGradKeys(), numKeyRows);
  Value dvInit = resultInit(op.getGradValues(), dimOf(b, op.getValues(), 0));
  ArrayRef<int64_t> q = op.getQueries().getType().getShape();
  ArrayRef<int64_t> k = op.getKeys().getType().getShape();
  const int64_t hq = q[1], hkv = k[1];
  constexpr int64_t dyn = ShapedType::kDynamic;
  Value deltaInit =
      empty(b, {1, hq, dyn}, b.getF32Type(), {Value(), Value(), numQueryRows});
  Value numSeqs = arith::SubIOp::create(b, dimOf(b, op.getCuSeqlensK(), 0),
                                        indexConst(b, 1));
  // The query index has a row per block slot, Tk / C + B of them: with Tk
  // and B below 2^31 its bytes stay below 2^43.
  requireAtRuntime(
      b, cmp(b, arith::CmpIPredicate::ule, numSeqs, indexConst(b, kMaxGPUKeys)),
      kName + ": B is above the GPU limit of " + std::to_string(kMaxGPUKeys) +
          " (the query index's rows)");
  Value numSlots = arith::AddIOp::create(
      b, arith::DivUIOp::create(b, numKeyRows, indexConst(b, c)), numSeqs);
  QueryListInits lists = queryListInits(b, hkv, indexConst(b, 1), numSlots,
                                        numQueryRows, selectionTopK(selection));
  const int64_t sumWidth = k[2] + op.getValues().getType().getShape()[2];
  Value sumsInit = empty(b, {1, hkv, dyn, sumWidth}, b.getF32Type(),
                         {Value(), Value(), numKeyRows, Value()});
  llvm::APFloat scale(op.getScaleOrDefault());
  Value output = asBatchOfOne(b, op.getOutput());
  Value gradOutput = asBatchOfOne(b, op.getGradOutput());
  Value lse = rowsAsBatchOfOne(b, op.getLse());
  Value zero = indexConst(b, 0);
  auto queryHalf = SparseAttentionGradQueriesKernelOp::create(
      b, TypeRange{dqInit.getType(), deltaInit.getType()}, queries, keys,
      values, selection, zero, output, lse, gradOutput, op.getCuSeqlensQ(),
      op.getCuSeqlensK(), dqInit, deltaInit, c, scale, /*token_major=*/true);
  auto keyHalf = SparseAttentionGradKeysKernelOp::create(
      b,
      TypeRange{dkInit.getType(), dvInit.getType(), lists.index.getType(),
                lists.list.getType(), sumsInit.getType()},
      queries, keys, values, selection, zero, lse, queryHalf.getResult(1),
      gradOutput, op.getCuSeqlensQ(), op.getCuSeqlensK(), dkInit, dvInit,
      lists.index, lists.list, sumsInit, Value(), c, scale,
      /*token_major=*/true);
  auto packed = [&](Value result, Type type) -> Value {
    return tensor::CollapseShapeOp::create(
        b, type, result, ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}});
  };
  rewriter.replaceOp(
      op, {packed(queryHalf.getResult(0), op.getGradQueries().getType()),
           packed(keyHalf.getResult(0), op.getGradKeys().getType()),
           packed(keyHalf.getResult(1), op.getGradValues().getType())});
}

/// sparse_attention_grad: the query kernel op (dq and D), then the key
/// kernel op (dk and dv, with its query lists' scratch).
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
  // The query index has a row per key block: N below 2^31 (as Nq is)
  // keeps its rows' block indices in i32.
  if (cast<ShapedType>(keys.getType()).isDynamicDim(tokens))
    requireAtRuntime(
        b,
        cmp(b, arith::CmpIPredicate::ule, numKeys, indexConst(b, kMaxGPUKeys)),
        (kName + ": N is above the GPU limit of " +
         std::to_string(kMaxGPUKeys) + " (the query index's rows)")
            .str());
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
  constexpr int64_t dyn = ShapedType::kDynamic;
  QueryListInits lists = queryListInits(b, hkv, batch, numBlocks, numQueries,
                                        selectionTopK(selection));
  const int64_t sumWidth = cast<ShapedType>(keys.getType()).getDimSize(3) +
                           cast<ShapedType>(values.getType()).getDimSize(3);
  Value sumsInit = empty(b, {dyn, hkv, dyn, sumWidth}, b.getF32Type(),
                         {batch, Value(), numKeys, Value()});
  llvm::APFloat scale(op.getScaleOrDefault());
  Type elem = getElementTypeOrSelf(queries.getType());
  const int64_t d = cast<ShapedType>(queries.getType()).getDimSize(3);
  const int64_t dv = cast<ShapedType>(values.getType()).getDimSize(3);
  const int64_t topK = selectionTopK(selection);
  if (op->hasAttr(kDqFromScoresAttrName) &&
      gradFromScoresFits(elem, hq / hkv, d, dv, op.getBlockSize())) {
    // D first (the key half reads it), the key half storing each attended
    // block's dS tile at the query's rank of it, then dq from the tiles.
    // The query lists then hold query K + rank in i32.
    requireAtRuntime(
        b,
        cmp(b, arith::CmpIPredicate::ule,
            arith::MulIOp::create(b, numQueries, indexConst(b, topK)),
            indexConst(b, kMaxGPUKeys)),
        (kName + ": Nq K is above " + std::to_string(kMaxGPUKeys) +
         " with dq from the dS tiles (the query lists' entries)")
            .str());
    auto deltaOp = SparseAttentionGradDeltaKernelOp::create(
        b, TypeRange{deltaInit.getType()}, op.getOutput(), op.getGradOutput(),
        deltaInit, tm);
    Value scoresInit = empty(
        b, {dyn, hkv, dyn, topK * (hq / hkv) * int64_t(op.getBlockSize())},
        elem, {batch, Value(), numQueries, Value()});
    auto keyHalf = SparseAttentionGradKeysKernelOp::create(
        b,
        TypeRange{dkInit.getType(), dvInit.getType(), lists.index.getType(),
                  lists.list.getType(), sumsInit.getType(),
                  scoresInit.getType()},
        queries, keys, values, selection, op.getQueryOffset(), op.getLse(),
        deltaOp.getResult(0), op.getGradOutput(), Value(), Value(), dkInit,
        dvInit, lists.index, lists.list, sumsInit, scoresInit,
        op.getBlockSize(), scale, tm);
    auto queryHalf = SparseAttentionGradQueriesFromScoresKernelOp::create(
        b, TypeRange{dqInit.getType()}, queries, keys, selection,
        op.getQueryOffset(), keyHalf.getResult(5), dqInit, op.getBlockSize(),
        scale, tm);
    rewriter.replaceOp(op, {queryHalf.getResult(0), keyHalf.getResult(0),
                            keyHalf.getResult(1)});
    return;
  }
  auto queryHalf = SparseAttentionGradQueriesKernelOp::create(
      b, TypeRange{dqInit.getType(), deltaInit.getType()}, queries, keys,
      values, selection, op.getQueryOffset(), op.getOutput(), op.getLse(),
      op.getGradOutput(), Value(), Value(), dqInit, deltaInit,
      op.getBlockSize(), scale, tm);
  auto keyHalf = SparseAttentionGradKeysKernelOp::create(
      b,
      TypeRange{dkInit.getType(), dvInit.getType(), lists.index.getType(),
                lists.list.getType(), sumsInit.getType()},
      queries, keys, values, selection, op.getQueryOffset(), op.getLse(),
      queryHalf.getResult(1), op.getGradOutput(), Value(), Value(), dkInit,
      dvInit, lists.index, lists.list, sumsInit, Value(), op.getBlockSize(),
      scale, tm);
  rewriter.replaceOp(
      op, {queryHalf.getResult(0), keyHalf.getResult(0), keyHalf.getResult(1)});
}
