//===- DecodeToLoops.cpp - pisa.decode_select as per-sequence selections --===//
//
// Batched decode over caches (docs/semantics.md, section 4): a loop over
// the sequences, each the capacity form of pisa.hier_topk over its own
// first N_b keys (the patterns of SelectionToLoops lower what this
// creates), or K entries of -2 per row where N_b breaks the rules. One
// contract with the single-sequence op, written once. A paged key cache
// (block_table) is gathered into a sequence's contiguous keys first, for
// the selection and for pisa.pyramid_append alike: the reference's way,
// O(N) per sequence.
//
//===----------------------------------------------------------------------===//

#include "../Common/LoopBuilders.h"

#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/Conversion/PisaToLinalg/PisaToLinalg.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

namespace {

/// tensor[b] as a batch of one, its dimension 2 `rows` long.
Value sequenceOf(ImplicitLocOpBuilder &b, Value tensor, Value batch,
                 Value rows) {
  auto type = cast<RankedTensorType>(tensor.getType());
  ArrayRef<int64_t> s = type.getShape();
  std::optional<int64_t> n = getConstantIntValue(rows);
  auto sliceType = RankedTensorType::get(
      {1, s[1], n ? *n : ShapedType::kDynamic, s[3]}, type.getElementType());
  SmallVector<OpFoldResult> offsets{batch, b.getIndexAttr(0), b.getIndexAttr(0),
                                    b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes{b.getIndexAttr(1), b.getIndexAttr(s[1]),
                                  getAsOpFoldResult(rows),
                                  b.getIndexAttr(s[3])};
  SmallVector<OpFoldResult> strides(4, b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(b, sliceType, tensor, offsets, sizes,
                                        strides);
}

/// A paged cache: pages [P, S, Hkv, d] and the block table [B, Mp].
struct PagedKeys {
  Value pages, table;
  int64_t pageSize, heads, d;
};

PagedKeys pagedKeys(Value pages, Value table) {
  ArrayRef<int64_t> s = cast<RankedTensorType>(pages.getType()).getShape();
  return {pages, table, s[1], s[2], s[3]};
}

/// Whether the pages holding keys 0 .. n - 1 of sequence `seq` are pages
/// of the pool (n <= Mp * S).
Value pagesExist(ImplicitLocOpBuilder &b, const PagedKeys &c, Value seq,
                 Value n) {
  using P = arith::CmpIPredicate;
  Value numPages = dimOf(b, c.pages, 0);
  Value zero = indexConst(b, 0);
  return buildLoop(
      b, zero,
      arith::CeilDivSIOp::create(b, arith::MaxSIOp::create(b, n, zero),
                                 indexConst(b, c.pageSize)),
      {arith::ConstantIntOp::create(b, 1, 1)},
      [&](ImplicitLocOpBuilder &lb, Value j, ValueRange acc) {
        Value page = toIndex(
            lb, tensor::ExtractOp::create(lb, c.table, ValueRange{seq, j}));
        Value inPool = arith::AndIOp::create(lb, cmp(lb, P::sge, page, zero),
                                             cmp(lb, P::slt, page, numPages));
        return SmallVector<Value>{arith::AndIOp::create(lb, acc[0], inPool)};
      })[0];
}

/// Keys 0 .. n - 1 of sequence `seq` as [1, Hkv, rows, d] (rows >= n; the
/// rows past n are zeros), page by page.
Value gatherKeys(ImplicitLocOpBuilder &b, const PagedKeys &c, Value seq,
                 Value n, Value rows, Type elem) {
  auto type =
      RankedTensorType::get({1, c.heads, ShapedType::kDynamic, c.d}, elem);
  Value init = emptyLike(b, type, {Value(), Value(), rows, Value()});
  Value zero = arith::ConstantOp::create(b, b.getZeroAttr(elem));
  init = linalg::FillOp::create(b, ValueRange{zero}, ValueRange{init})
             .getResult(0);
  Value cS = indexConst(b, c.pageSize);
  return buildLoop(
      b, indexConst(b, 0), arith::CeilDivUIOp::create(b, n, cS), {init},
      [&](ImplicitLocOpBuilder &lb, Value j, ValueRange acc) {
        Value page = toIndex(
            lb, tensor::ExtractOp::create(lb, c.table, ValueRange{seq, j}));
        Value first = arith::MulIOp::create(lb, j, cS);
        Value count =
            arith::MinUIOp::create(lb, cS, arith::SubIOp::create(lb, n, first));
        SmallVector<OpFoldResult> strides(4, lb.getIndexAttr(1));
        auto sliceType = RankedTensorType::get(
            {1, ShapedType::kDynamic, c.heads, c.d}, elem);
        Value slice = tensor::ExtractSliceOp::create(
            lb, sliceType, c.pages,
            SmallVector<OpFoldResult>{page, lb.getIndexAttr(0),
                                      lb.getIndexAttr(0), lb.getIndexAttr(0)},
            SmallVector<OpFoldResult>{lb.getIndexAttr(1), count,
                                      lb.getIndexAttr(c.heads),
                                      lb.getIndexAttr(c.d)},
            strides);
        Value headMajor =
            emptyLike(lb,
                      RankedTensorType::get(
                          {1, c.heads, ShapedType::kDynamic, c.d}, elem),
                      {Value(), Value(), count, Value()});
        Value transposed =
            linalg::TransposeOp::create(lb, slice, headMajor,
                                        ArrayRef<int64_t>{0, 2, 1, 3})
                .getResult()[0];
        return SmallVector<Value>{tensor::InsertSliceOp::create(
            lb, transposed, acc[0],
            SmallVector<OpFoldResult>{lb.getIndexAttr(0), lb.getIndexAttr(0),
                                      first, lb.getIndexAttr(0)},
            SmallVector<OpFoldResult>{lb.getIndexAttr(1),
                                      lb.getIndexAttr(c.heads), count,
                                      lb.getIndexAttr(c.d)},
            strides)};
      })[0];
}

/// pisa.pyramid_append over a paged cache: per sequence, its keys gathered
/// into a [1, Hkv, Ncap, d] cache, the contiguous append of that sequence,
/// its pyramid rows put back; a sequence whose pages are not in the pool
/// is left unchanged.
struct PagedAppendToLoops : OpConversionPattern<PyramidAppendOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(PyramidAppendOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!op.getBlockTable())
      return rewriter.notifyMatchFailure(op, "not paged");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    PagedKeys c = pagedKeys(adaptor.getKeys(), adaptor.getBlockTable());
    Value pyramid = adaptor.getPyramid();
    const int64_t capacity = op.getCapacity();
    Type elem = op.getKeys().getType().getElementType();
    ArrayRef<int64_t> p = op.getPyramid().getType().getShape();
    auto seqPyramidType =
        RankedTensorType::get({1, p[1], p[2], p[3]}, b.getF32Type());
    auto boundType = RankedTensorType::get({1}, b.getI32Type());
    SmallVector<Value> result = buildLoop(
        b, indexConst(b, 0), dimOf(b, c.table, 0), {pyramid},
        [&](ImplicitLocOpBuilder &lb, Value seq, ValueRange acc) {
          Value from = tensor::ExtractOp::create(lb, adaptor.getFrom(), seq);
          Value to = tensor::ExtractOp::create(lb, adaptor.getTo(), seq);
          Value n = arith::MinSIOp::create(lb, toIndex(lb, to),
                                           indexConst(lb, capacity));
          return buildIf(
              lb, pagesExist(lb, c, seq, n), {acc[0].getType()},
              [&](ImplicitLocOpBuilder &tb) {
                Value keys =
                    gatherKeys(tb, c, seq,
                               arith::MaxSIOp::create(tb, n, indexConst(tb, 0)),
                               indexConst(tb, capacity), elem);
                keys = tensor::CastOp::create(
                    tb,
                    RankedTensorType::get({1, c.heads, capacity, c.d}, elem),
                    keys);
                SmallVector<OpFoldResult> offsets{seq, tb.getIndexAttr(0),
                                                  tb.getIndexAttr(0),
                                                  tb.getIndexAttr(0)};
                SmallVector<OpFoldResult> sizes{
                    tb.getIndexAttr(1), tb.getIndexAttr(p[1]),
                    tb.getIndexAttr(p[2]), tb.getIndexAttr(p[3])};
                SmallVector<OpFoldResult> strides(4, tb.getIndexAttr(1));
                Value seqPyramid = tensor::ExtractSliceOp::create(
                    tb, seqPyramidType, acc[0], offsets, sizes, strides);
                Value updated = PyramidAppendOp::create(
                    tb, seqPyramidType, keys, seqPyramid,
                    tensor::FromElementsOp::create(tb, boundType,
                                                   ValueRange{from}),
                    tensor::FromElementsOp::create(tb, boundType,
                                                   ValueRange{to}),
                    /*block_table=*/Value(), op.getBlockSize(),
                    op.getBranching());
                return SmallVector<Value>{tensor::InsertSliceOp::create(
                    tb, updated, acc[0], offsets, sizes, strides)};
              },
              [&](ImplicitLocOpBuilder &) {
                return SmallVector<Value>{acc[0]};
              });
        });
    rewriter.replaceOp(op, result[0]);
    return success();
  }
};

struct DecodeSelectToLoops : OpConversionPattern<DecodeSelectOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(DecodeSelectOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    using P = arith::CmpIPredicate;
    Value queries = adaptor.getQueries(), keys = adaptor.getKeys();
    Value pyramid = adaptor.getPyramid(), lens = adaptor.getSeqLens();
    const int64_t capacity = op.getCapacity(), topK = op.getTopk();
    RankedTensorType type = op.getSelection().getType();
    ArrayRef<int64_t> r = type.getShape();
    Value numQueries = dimOf(b, queries, 2);
    Value init = emptyLike(
        b, type, {dimOf(b, queries, 0), Value(), numQueries, Value()});
    auto rowType = RankedTensorType::get({1, r[1], r[2], topK}, b.getI32Type());
    Value cap = indexConst(b, capacity);
    std::optional<PagedKeys> paged;
    if (Value table = adaptor.getBlockTable())
      paged = pagedKeys(keys, table);
    Type elem = op.getKeys().getType().getElementType();
    SmallVector<Value> result = buildLoop(
        b, indexConst(b, 0), dimOf(b, queries, 0), {init},
        [&](ImplicitLocOpBuilder &lb, Value seq, ValueRange acc) {
          Value n = toIndex(lb, tensor::ExtractOp::create(lb, lens, seq));
          // Signed: a negative length is no length.
          Value valid = arith::AndIOp::create(
              lb, cmp(lb, P::sle, numQueries, n), cmp(lb, P::sle, n, cap));
          if (paged)
            valid = buildIf(
                lb, valid, {lb.getI1Type()},
                [&](ImplicitLocOpBuilder &tb) {
                  return SmallVector<Value>{pagesExist(tb, *paged, seq, n)};
                },
                [&](ImplicitLocOpBuilder &eb) {
                  return SmallVector<Value>{
                      arith::ConstantIntOp::create(eb, 0, 1)};
                })[0];
          Value rowsOf = buildIf(
              lb, valid, {rowType},
              [&](ImplicitLocOpBuilder &tb) {
                Value sel = HierTopKOp::create(
                    tb, rowType, sequenceOf(tb, queries, seq, numQueries),
                    paged ? gatherKeys(tb, *paged, seq, n, n, elem)
                          : sequenceOf(tb, keys, seq, n),
                    sequenceOf(tb, pyramid, seq, dimOf(tb, pyramid, 2)),
                    arith::SubIOp::create(tb, n, numQueries), topK,
                    op.getBlockSize(), op.getBranching(), op.getScaleAttr(),
                    /*schedule=*/nullptr, tb.getI64IntegerAttr(capacity));
                return SmallVector<Value>{sel};
              },
              [&](ImplicitLocOpBuilder &eb) {
                Value empty = emptyLike(
                    eb, rowType, {Value(), Value(), numQueries, Value()});
                Value marker =
                    arith::ConstantIntOp::create(eb, kInvalidInput, 32);
                return SmallVector<Value>{
                    linalg::FillOp::create(eb, ValueRange{marker},
                                           ValueRange{empty})
                        .getResult(0)};
              })[0];
          SmallVector<OpFoldResult> offsets{
              seq, lb.getIndexAttr(0), lb.getIndexAttr(0), lb.getIndexAttr(0)};
          SmallVector<OpFoldResult> sizes{
              lb.getIndexAttr(1), lb.getIndexAttr(r[1]),
              getAsOpFoldResult(numQueries), lb.getIndexAttr(topK)};
          SmallVector<OpFoldResult> strides(4, lb.getIndexAttr(1));
          return SmallVector<Value>{tensor::InsertSliceOp::create(
              lb, rowsOf, acc[0], offsets, sizes, strides)};
        });
    rewriter.replaceOp(op, result[0]);
    return success();
  }
};

} // namespace

void mlir::pisa::populateDecodeToLoopsPatterns(RewritePatternSet &patterns) {
  patterns.add<DecodeSelectToLoops, PagedAppendToLoops>(patterns.getContext());
}
