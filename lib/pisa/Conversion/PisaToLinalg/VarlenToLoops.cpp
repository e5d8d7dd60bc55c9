//===- VarlenToLoops.cpp - packed and token-major layouts on the CPU ------===//
//
// Token-major batched ops become the head-major op between transposes.
// The CPU reference of docs/semantics.md, section 7, written as the
// contract states it (the selection, sparse attention and its gradient):
// for each sequence b, the batched op (B = 1) on that
// sequence's rows, head-major, with query_offset = N_b - Nq_b; the result
// rows go back token-major. The batched ops created here are lowered by
// the other patterns of the same conversion. The rules on cu_seqlens are
// checked for every sequence before any is computed.
//
//===----------------------------------------------------------------------===//

#include "../Common/LevelLayout.h"
#include "../Common/LoopBuilders.h"
#include "../Common/VarlenRows.h"

#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/Conversion/PisaToLinalg/PisaToLinalg.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

namespace {

constexpr int64_t kAny = ShapedType::kDynamic;

/// cu[at] as an index.
Value entry(ImplicitLocOpBuilder &b, Value cuSeqlens, Value at) {
  return arith::IndexCastOp::create(
      b, b.getIndexType(), tensor::ExtractOp::create(b, cuSeqlens, at));
}

/// Rows first .. first + count - 1 of a token-major [T, H, X] (or [T, H])
/// tensor.
Value rows(ImplicitLocOpBuilder &b, Value packed, Value first, Value count) {
  auto type = cast<RankedTensorType>(packed.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = kAny;
  auto sliceType = RankedTensorType::get(shape, type.getElementType());
  SmallVector<OpFoldResult> offsets(shape.size(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes{count};
  offsets[0] = first;
  for (int64_t extent : ArrayRef<int64_t>(shape).drop_front())
    sizes.push_back(b.getIndexAttr(extent));
  SmallVector<OpFoldResult> strides(shape.size(), b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(b, sliceType, packed, offsets, sizes,
                                        strides);
}

/// [n, H, X] token-major -> [1, H, n, X] head-major (a batch of one); [n, H]
/// -> [1, H, n].
Value toHeadMajor(ImplicitLocOpBuilder &b, Value tokens) {
  auto type = cast<RankedTensorType>(tokens.getType());
  ArrayRef<int64_t> s = type.getShape();
  SmallVector<int64_t> expanded{1, kAny};
  SmallVector<OpFoldResult> sizes{b.getIndexAttr(1), dimOf(b, tokens, 0)};
  SmallVector<ReassociationIndices> groups{{0, 1}};
  for (int64_t i = 1, e = s.size(); i < e; ++i) {
    expanded.push_back(s[i]);
    sizes.push_back(b.getIndexAttr(s[i]));
    groups.push_back({i + 1});
  }
  Value batchOfOne = tensor::ExpandShapeOp::create(
      b, RankedTensorType::get(expanded, type.getElementType()), tokens, groups,
      sizes);
  return swapHeadsAndTokens(b, batchOfOne);
}

/// [1, H, n, X] head-major -> [n, H, X] token-major; [1, H, n] -> [n, H].
Value toTokenMajor(ImplicitLocOpBuilder &b, Value heads) {
  const int64_t rank = cast<RankedTensorType>(heads.getType()).getRank();
  SmallVector<ReassociationIndices> groups{{0, 1}};
  for (int64_t i = 2; i < rank; ++i)
    groups.push_back({i});
  return tensor::CollapseShapeOp::create(b, swapHeadsAndTokens(b, heads),
                                         groups);
}

/// Writes `part` [n, H, X] (or [n, H]) into rows first .. first + n - 1 of
/// `into`.
Value insertRows(ImplicitLocOpBuilder &b, Value part, Value into, Value first) {
  ArrayRef<int64_t> s = cast<RankedTensorType>(part.getType()).getShape();
  SmallVector<OpFoldResult> offsets(s.size(), b.getIndexAttr(0));
  offsets[0] = first;
  SmallVector<OpFoldResult> sizes{dimOf(b, part, 0)};
  for (int64_t extent : s.drop_front())
    sizes.push_back(b.getIndexAttr(extent));
  SmallVector<OpFoldResult> strides(s.size(), b.getIndexAttr(1));
  return tensor::InsertSliceOp::create(b, part, into, offsets, sizes, strides);
}

/// The rules of section 7 on one cu_seqlens (B + 1 entries for T rows):
/// starts at 0, never decreases, ends at T. With `queries`, also
/// Nq_b <= N_b against `keys`' cu_seqlens. One cf.assert per rule.
void requireCuSeqlens(ImplicitLocOpBuilder &b, StringRef op, Value cuKeys,
                      Value numKeys, Value cuQueries = Value(),
                      Value numQueries = Value()) {
  Value zero = indexConst(b, 0), one = indexConst(b, 1);
  Value numSeqs = arith::SubIOp::create(b, dimOf(b, cuKeys, 0), one);
  auto require = [&](Value ok, const Twine &what) {
    cf::AssertOp::create(b, ok, (op + ": " + what).str());
  };
  using P = arith::CmpIPredicate;
  require(cmp(b, P::eq, entry(b, cuKeys, zero), zero),
          "cu_seqlens_k[0] is not 0");
  require(cmp(b, P::eq, entry(b, cuKeys, numSeqs), numKeys),
          "cu_seqlens_k[B] is not the number of key rows");
  if (cuQueries) {
    require(cmp(b, P::eq, dimOf(b, cuQueries, 0), dimOf(b, cuKeys, 0)),
            "cu_seqlens_q and cu_seqlens_k give different B");
    require(cmp(b, P::eq, entry(b, cuQueries, zero), zero),
            "cu_seqlens_q[0] is not 0");
    require(cmp(b, P::eq, entry(b, cuQueries, numSeqs), numQueries),
            "cu_seqlens_q[B] is not the number of query rows");
  }
  Value trueV = arith::ConstantIntOp::create(b, 1, 1);
  SmallVector<Value> ok = buildLoop(
      b, zero, numSeqs, {trueV, trueV},
      [&](ImplicitLocOpBuilder &lb, Value seq, ValueRange acc) {
        Value next = arith::AddIOp::create(lb, seq, one);
        Value k0 = entry(lb, cuKeys, seq), k1 = entry(lb, cuKeys, next);
        Value monotone = arith::AndIOp::create(
            lb, acc[0],
            cmp(lb, P::sle, arith::IndexCastOp::create(lb, lb.getI64Type(), k0),
                arith::IndexCastOp::create(lb, lb.getI64Type(), k1)));
        Value fits = acc[1];
        if (cuQueries) {
          Value q0 = entry(lb, cuQueries, seq), q1 = entry(lb, cuQueries, next);
          auto i64 = [&](Value v) {
            return arith::IndexCastOp::create(lb, lb.getI64Type(), v);
          };
          monotone = arith::AndIOp::create(lb, monotone,
                                           cmp(lb, P::sle, i64(q0), i64(q1)));
          fits = arith::AndIOp::create(
              lb, fits,
              cmp(lb, P::sle, arith::SubIOp::create(lb, i64(q1), i64(q0)),
                  arith::SubIOp::create(lb, i64(k1), i64(k0))));
        }
        return SmallVector<Value>{monotone, fits};
      });
  require(ok[0], "cu_seqlens decrease");
  if (cuQueries)
    require(ok[1], "a sequence has more queries than keys (Nq_b > N_b)");
}

struct PyramidBuildVarlenToLoops : OpConversionPattern<PyramidBuildVarlenOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(PyramidBuildVarlenOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value keys = adaptor.getKeys(), cu = adaptor.getCuSeqlens();
    const int64_t blockSize = op.getBlockSize();
    Value numKeys = dimOf(b, keys, 0);
    requireCuSeqlens(b, "pisa.pyramid_build_varlen", cu, numKeys);
    Value zero = indexConst(b, 0), one = indexConst(b, 1);
    Value numSeqs = arith::SubIOp::create(b, dimOf(b, cu, 0), one);
    RankedTensorType type = op.getPyramid().getType();
    // Rows between sequences are unspecified; zeros keep runs reproducible.
    Value totalRows = firstPyramidRow(b, numKeys, numSeqs, blockSize);
    Value init = emptyLike(b, type, {totalRows, Value(), Value()});
    init =
        linalg::FillOp::create(
            b,
            ValueRange{arith::ConstantOp::create(b, b.getF32FloatAttr(0.0f))},
            ValueRange{init})
            .getResult(0);
    ArrayRef<int64_t> k = op.getKeys().getType().getShape();
    auto pyramidType =
        RankedTensorType::get({1, k[1], kAny, k[2]}, b.getF32Type());
    SmallVector<Value> result = buildLoop(
        b, zero, numSeqs, {init},
        [&](ImplicitLocOpBuilder &lb, Value seq, ValueRange acc) {
          Value k0 = entry(lb, cu, seq);
          Value k1 = entry(lb, cu, arith::AddIOp::create(lb, seq, one));
          Value seqKeys = toHeadMajor(
              lb, rows(lb, keys, k0, arith::SubIOp::create(lb, k1, k0)));
          Value pyramid = PyramidBuildOp::create(
              lb, pyramidType, seqKeys, op.getBlockSize(), op.getBranching());
          return SmallVector<Value>{
              insertRows(lb, toTokenMajor(lb, pyramid), acc[0],
                         firstPyramidRow(lb, k0, seq, blockSize))};
        });
    Value out = result[0];
    if (out.getType() != type)
      out = tensor::CastOp::create(b, type, out);
    rewriter.replaceOp(op, out);
    return success();
  }
};

struct HierTopKVarlenToLoops : OpConversionPattern<HierTopKVarlenOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(HierTopKVarlenOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value queries = adaptor.getQueries(), keys = adaptor.getKeys();
    Value pyramid = adaptor.getPyramid();
    Value cuQ = adaptor.getCuSeqlensQ(), cuK = adaptor.getCuSeqlensK();
    const int64_t blockSize = op.getBlockSize(), fanout = op.getBranching();
    const int64_t topK = op.getTopk();
    requireCuSeqlens(b, "pisa.hier_topk_varlen", cuK, dimOf(b, keys, 0), cuQ,
                     dimOf(b, queries, 0));
    Value zero = indexConst(b, 0), one = indexConst(b, 1);
    Value numSeqs = arith::SubIOp::create(b, dimOf(b, cuK, 0), one);
    RankedTensorType type = op.getSelection().getType();
    Value init = emptyLike(b, type, {dimOf(b, queries, 0), Value(), Value()});
    ArrayRef<int64_t> k = op.getKeys().getType().getShape();
    auto selType = RankedTensorType::get({1, k[1], kAny, topK}, b.getI32Type());
    SmallVector<Value> result = buildLoop(
        b, zero, numSeqs, {init},
        [&](ImplicitLocOpBuilder &lb, Value seq, ValueRange acc) {
          Value next = arith::AddIOp::create(lb, seq, one);
          Value q0 = entry(lb, cuQ, seq), q1 = entry(lb, cuQ, next);
          Value k0 = entry(lb, cuK, seq), k1 = entry(lb, cuK, next);
          Value numQueries = arith::SubIOp::create(lb, q1, q0);
          Value numKeys = arith::SubIOp::create(lb, k1, k0);
          LevelLayout layout(lb, numKeys, blockSize, fanout);
          Value seqPyramid = toHeadMajor(
              lb, rows(lb, pyramid, firstPyramidRow(lb, k0, seq, blockSize),
                       layout.totalRows()));
          auto select = HierTopKOp::create(
              lb, selType, toHeadMajor(lb, rows(lb, queries, q0, numQueries)),
              toHeadMajor(lb, rows(lb, keys, k0, numKeys)), seqPyramid,
              arith::SubIOp::create(lb, numKeys, numQueries), topK, blockSize,
              fanout, op.getScaleAttr(), /*schedule=*/nullptr,
              /*capacity=*/nullptr);
          return SmallVector<Value>{
              insertRows(lb, toTokenMajor(lb, select), acc[0], q0)};
        });
    rewriter.replaceOp(op, result[0]);
    return success();
  }
};

/// Sequence `seq`'s rows of a packed batch: its first query and key rows,
/// how many, and its queries' offset N_b - Nq_b.
struct SequenceRows {
  Value firstQuery, numQueries, firstKey, numKeys, offset;
};
SequenceRows sequenceRows(ImplicitLocOpBuilder &b, Value cuQ, Value cuK,
                          Value seq) {
  Value next = arith::AddIOp::create(b, seq, indexConst(b, 1));
  Value q0 = entry(b, cuQ, seq), k0 = entry(b, cuK, seq);
  Value numQueries = arith::SubIOp::create(b, entry(b, cuQ, next), q0);
  Value numKeys = arith::SubIOp::create(b, entry(b, cuK, next), k0);
  return {q0, numQueries, k0, numKeys,
          arith::SubIOp::create(b, numKeys, numQueries)};
}

/// One sequence's rows of packed operands as a batch of one, head-major.
struct SequenceViews {
  ImplicitLocOpBuilder &b;
  SequenceRows r;
  Value queryRows(Value packed) const {
    return toHeadMajor(b, rows(b, packed, r.firstQuery, r.numQueries));
  }
  Value keyRows(Value packed) const {
    return toHeadMajor(b, rows(b, packed, r.firstKey, r.numKeys));
  }
};

/// Checks the rules on a packed attention's cu_seqlens (naming `op`) and
/// returns B.
Value checkedSequences(ImplicitLocOpBuilder &b, StringRef op, Value cuQ,
                       Value cuK, Value queries, Value keys) {
  requireCuSeqlens(b, op, cuK, dimOf(b, keys, 0), cuQ, dimOf(b, queries, 0));
  return arith::SubIOp::create(b, dimOf(b, cuK, 0), indexConst(b, 1));
}

/// [1, H, ?, X] (or [1, H, ?] for an lse) of `packed`'s element type and
/// dimensions, `packed` being [T, H, X] (or [T, H]).
RankedTensorType batchOfOneType(Type packed) {
  auto type = cast<RankedTensorType>(packed);
  SmallVector<int64_t> shape{1, type.getDimSize(1), kAny};
  if (type.getRank() == 3)
    shape.push_back(type.getDimSize(2));
  return RankedTensorType::get(shape, type.getElementType());
}

struct SparseAttentionVarlenToLoops
    : OpConversionPattern<SparseAttentionVarlenOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SparseAttentionVarlenOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value queries = adaptor.getQueries(), keys = adaptor.getKeys();
    Value cuQ = adaptor.getCuSeqlensQ(), cuK = adaptor.getCuSeqlensK();
    Value numSeqs = checkedSequences(b, "pisa.sparse_attention_varlen", cuQ,
                                     cuK, queries, keys);
    Value numQueryRows = dimOf(b, queries, 0);
    Value outInit = emptyLike(b, op.getOutput().getType(),
                              {numQueryRows, Value(), Value()});
    Value lseInit =
        emptyLike(b, op.getLse().getType(), {numQueryRows, Value()});
    SmallVector<Value> result =
        buildLoop(b, indexConst(b, 0), numSeqs, {outInit, lseInit},
                  [&](ImplicitLocOpBuilder &lb, Value seq, ValueRange acc) {
                    SequenceViews s{lb, sequenceRows(lb, cuQ, cuK, seq)};
                    auto attention = SparseAttentionOp::create(
                        lb,
                        TypeRange{batchOfOneType(op.getOutput().getType()),
                                  batchOfOneType(op.getLse().getType())},
                        s.queryRows(queries), s.keyRows(keys),
                        s.keyRows(adaptor.getValues()),
                        s.queryRows(adaptor.getSelection()), s.r.offset,
                        op.getBlockSize(), op.getScaleAttr());
                    Value first = s.r.firstQuery;
                    return SmallVector<Value>{
                        insertRows(lb, toTokenMajor(lb, attention.getOutput()),
                                   acc[0], first),
                        insertRows(lb, toTokenMajor(lb, attention.getLse()),
                                   acc[1], first)};
                  });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct SparseAttentionGradVarlenToLoops
    : OpConversionPattern<SparseAttentionGradVarlenOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SparseAttentionGradVarlenOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value queries = adaptor.getQueries(), keys = adaptor.getKeys();
    Value cuQ = adaptor.getCuSeqlensQ(), cuK = adaptor.getCuSeqlensK();
    Value numSeqs = checkedSequences(b, "pisa.sparse_attention_grad_varlen",
                                     cuQ, cuK, queries, keys);
    Value numQueryRows = dimOf(b, queries, 0);
    Value numKeyRows = dimOf(b, keys, 0);
    SmallVector<Value> inits{emptyLike(b, op.getGradQueries().getType(),
                                       {numQueryRows, Value(), Value()}),
                             emptyLike(b, op.getGradKeys().getType(),
                                       {numKeyRows, Value(), Value()}),
                             emptyLike(b, op.getGradValues().getType(),
                                       {numKeyRows, Value(), Value()})};
    SmallVector<Value> result = buildLoop(
        b, indexConst(b, 0), numSeqs, inits,
        [&](ImplicitLocOpBuilder &lb, Value seq, ValueRange acc) {
          SequenceViews s{lb, sequenceRows(lb, cuQ, cuK, seq)};
          auto grad = SparseAttentionGradOp::create(
              lb,
              TypeRange{batchOfOneType(op.getGradQueries().getType()),
                        batchOfOneType(op.getGradKeys().getType()),
                        batchOfOneType(op.getGradValues().getType())},
              s.queryRows(queries), s.keyRows(keys),
              s.keyRows(adaptor.getValues()),
              s.queryRows(adaptor.getSelection()), s.r.offset,
              s.queryRows(adaptor.getOutput()), s.queryRows(adaptor.getLse()),
              s.queryRows(adaptor.getGradOutput()), op.getBlockSize(),
              op.getScaleAttr());
          return SmallVector<Value>{
              insertRows(lb, toTokenMajor(lb, grad.getGradQueries()), acc[0],
                         s.r.firstQuery),
              insertRows(lb, toTokenMajor(lb, grad.getGradKeys()), acc[1],
                         s.r.firstKey),
              insertRows(lb, toTokenMajor(lb, grad.getGradValues()), acc[2],
                         s.r.firstKey)};
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Token-major batched ops: the same op head-major between transposes.
struct TokenMajorPyramidBuild : OpRewritePattern<PyramidBuildOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PyramidBuildOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getTokenMajor())
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    rewriter.replaceOp(
        op, PyramidBuildOp::create(b, op.getPyramid().getType(),
                                   swapHeadsAndTokens(b, op.getKeys()),
                                   op.getBlockSize(), op.getBranching()));
    return success();
  }
};

struct TokenMajorHierTopK : OpRewritePattern<HierTopKOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(HierTopKOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getTokenMajor())
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value sel = HierTopKOp::create(
        b, swapHeadsAndTokens(op.getSelection().getType()),
        swapHeadsAndTokens(b, op.getQueries()),
        swapHeadsAndTokens(b, op.getKeys()), op.getPyramid(),
        op.getQueryOffset(), op.getTopk(), op.getBlockSize(), op.getBranching(),
        op.getScaleAttr(), op.getScheduleAttr(), op.getCapacityAttr());
    rewriter.replaceOp(op, swapHeadsAndTokens(b, sel));
    return success();
  }
};

} // namespace

void mlir::pisa::populateVarlenToLoopsPatterns(RewritePatternSet &patterns) {
  patterns.add<PyramidBuildVarlenToLoops, HierTopKVarlenToLoops,
               SparseAttentionVarlenToLoops, SparseAttentionGradVarlenToLoops,
               TokenMajorPyramidBuild, TokenMajorHierTopK>(
      patterns.getContext());
}
