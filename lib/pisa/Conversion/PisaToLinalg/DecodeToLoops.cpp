//===- DecodeToLoops.cpp - pisa.decode_select as per-sequence selections --===//
//
// Batched decode over caches (docs/semantics.md, section 4): a loop over
// the sequences, each the capacity form of pisa.hier_topk over its own
// first N_b keys (the patterns of SelectionToLoops lower what this
// creates), or K entries of -2 per row where N_b breaks the rules. One
// contract with the single-sequence op, written once.
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
  SmallVector<OpFoldResult> offsets{batch, b.getIndexAttr(0),
                                    b.getIndexAttr(0), b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes{b.getIndexAttr(1), b.getIndexAttr(s[1]),
                                  getAsOpFoldResult(rows),
                                  b.getIndexAttr(s[3])};
  SmallVector<OpFoldResult> strides(4, b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(b, sliceType, tensor, offsets, sizes,
                                        strides);
}

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
    Value init =
        emptyLike(b, type, {dimOf(b, queries, 0), Value(), numQueries, Value()});
    auto rowType = RankedTensorType::get({1, r[1], r[2], topK}, b.getI32Type());
    Value cap = indexConst(b, capacity);
    SmallVector<Value> result = buildLoop(
        b, indexConst(b, 0), dimOf(b, queries, 0), {init},
        [&](ImplicitLocOpBuilder &lb, Value seq, ValueRange acc) {
          Value n = toIndex(lb, tensor::ExtractOp::create(lb, lens, seq));
          // Signed: a negative length is no length.
          Value valid = arith::AndIOp::create(lb, cmp(lb, P::sle, numQueries, n),
                                              cmp(lb, P::sle, n, cap));
          Value rowsOf = buildIf(
              lb, valid, {rowType},
              [&](ImplicitLocOpBuilder &tb) {
                Value sel = HierTopKOp::create(
                    tb, rowType,
                    sequenceOf(tb, queries, seq, numQueries),
                    sequenceOf(tb, keys, seq, n),
                    sequenceOf(tb, pyramid, seq,
                               dimOf(tb, pyramid, 2)),
                    arith::SubIOp::create(tb, n, numQueries), topK,
                    op.getBlockSize(), op.getBranching(), op.getScaleAttr(),
                    /*schedule=*/nullptr, tb.getI64IntegerAttr(capacity));
                return SmallVector<Value>{sel};
              },
              [&](ImplicitLocOpBuilder &eb) {
                Value empty = emptyLike(eb, rowType,
                                        {Value(), Value(), numQueries, Value()});
                Value marker =
                    arith::ConstantIntOp::create(eb, kInvalidInput, 32);
                return SmallVector<Value>{
                    linalg::FillOp::create(eb, ValueRange{marker},
                                           ValueRange{empty})
                        .getResult(0)};
              })[0];
          SmallVector<OpFoldResult> offsets{seq, lb.getIndexAttr(0),
                                            lb.getIndexAttr(0),
                                            lb.getIndexAttr(0)};
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
  patterns.add<DecodeSelectToLoops>(patterns.getContext());
}
