//===- AttentionToLoops.cpp - sparse_attention to scf loops ---------------===//
//
// The CPU reference of pisa.sparse_attention (docs/semantics.md, section 6):
// loops over (batch, query head, query); per query an online softmax over
// the keys of the blocks its selection row uses, with the running max, the
// running sum and a [dv] f32 accumulator as iter_args. Nothing is N x N or
// Nq x N; the output is rounded to the queries' type once, at the end.
//
//===----------------------------------------------------------------------===//

#include "../Common/LoopBuilders.h"

#include "pisa/Conversion/PisaToLinalg/PisaToLinalg.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

namespace {
/// One query's online-softmax state.
struct Softmax {
  Value max, sum, acc; ///< f32, f32, tensor<dv x f32>
};

struct SparseAttentionToLoops : OpRewritePattern<SparseAttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SparseAttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getTokenMajor())
      return rewriter.notifyMatchFailure(op, "token-major: transposed first");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    RankedTensorType qType = op.getQueries().getType();
    const int64_t queryHeads = qType.getDimSize(1), d = qType.getDimSize(3);
    const int64_t kvHeads = op.getKeys().getType().getDimSize(1);
    const int64_t dv = op.getValues().getType().getDimSize(3);
    const int64_t topK = op.getSelection().getType().getDimSize(3);
    const int64_t groupSize = queryHeads / kvHeads;
    Value batch = dimOf(b, op.getQueries(), 0);
    Value numQueries = dimOf(b, op.getQueries(), 2);
    Value numKeys = dimOf(b, op.getKeys(), 2);
    Value zero = indexConst(b, 0), one = indexConst(b, 1);
    Value cBlock = indexConst(b, op.getBlockSize());
    Value numBlocks = arith::CeilDivUIOp::create(b, numKeys, cBlock);
    Value scale = f32Const(b, op.getScaleOrDefault());
    Value negInf = f32Const(b, -std::numeric_limits<float>::infinity());
    Value zeroF = f32Const(b, 0.0f);

    SmallVector<Value> outSizes{batch, indexConst(b, queryHeads), numQueries,
                                indexConst(b, dv)};
    Value out = emptyLike(b, op.getOutput().getType(), outSizes);
    Value lse = emptyLike(b, op.getLse().getType(), outSizes);
    auto accType = RankedTensorType::get({dv}, b.getF32Type());
    Value accInit =
        tensor::EmptyOp::create(b, accType.getShape(), b.getF32Type());

    auto perQuery = [&](ImplicitLocOpBuilder &qb, Value bi, Value h, Value i,
                        ValueRange st) -> SmallVector<Value> {
      Value kv = arith::DivUIOp::create(qb, h, indexConst(qb, groupSize));
      Value t = arith::AddIOp::create(qb, op.getQueryOffset(), i);
      // Keys past t or N are never attended.
      Value keyEnd = arith::MinUIOp::create(qb, numKeys,
                                            arith::AddIOp::create(qb, t, one));
      Value acc0 = buildLoop(
          qb, zero, indexConst(qb, dv), {accInit},
          [&](ImplicitLocOpBuilder &lb, Value e, ValueRange a) {
            return SmallVector<Value>{
                tensor::InsertOp::create(lb, zeroF, a[0], e).getResult()};
          })[0];

      // Over the selection row: entries used in order (docs/semantics.md 6).
      auto rowState = buildLoop(
          qb, zero, indexConst(qb, topK),
          {negInf, zeroF, acc0, indexConst(qb, -1)},
          [&](ImplicitLocOpBuilder &eb, Value slot, ValueRange es) {
            Value raw = tensor::ExtractOp::create(eb, op.getSelection(),
                                                  ValueRange{bi, kv, i, slot});
            Value block =
                arith::IndexCastOp::create(eb, eb.getIndexType(), raw);
            Value lastUsed = es[3];
            Value nonNegative =
                arith::CmpIOp::create(eb, arith::CmpIPredicate::sge, raw,
                                      arith::ConstantIntOp::create(eb, 0, 32));
            Value used = arith::AndIOp::create(
                eb, nonNegative,
                arith::AndIOp::create(
                    eb, cmp(eb, arith::CmpIPredicate::ult, block, numBlocks),
                    cmp(eb, arith::CmpIPredicate::sgt, block, lastUsed)));
            SmallVector<Value> softmax = buildIf(
                eb, used, {eb.getF32Type(), eb.getF32Type(), accType},
                [&](ImplicitLocOpBuilder &tb) {
                  Value first = arith::MulIOp::create(tb, block, cBlock);
                  Value end = arith::MinUIOp::create(
                      tb, keyEnd, arith::AddIOp::create(tb, first, cBlock));
                  end = arith::MaxUIOp::create(tb, end, first);
                  return attendKeys(tb, op, {es[0], es[1], es[2]}, bi, h, kv, i,
                                    first, end, scale, d, dv);
                },
                [&](ImplicitLocOpBuilder &) {
                  return SmallVector<Value>{es[0], es[1], es[2]};
                });
            Value nextLast = arith::SelectOp::create(eb, used, block, lastUsed);
            return SmallVector<Value>{softmax[0], softmax[1], softmax[2],
                                      nextLast};
          });

      // o = acc / sum (zeros for an empty row), lse = max + log(sum).
      Value empty = arith::CmpFOp::create(qb, arith::CmpFPredicate::OEQ,
                                          rowState[1], zeroF);
      Value lseValue = arith::SelectOp::create(
          qb, empty, negInf,
          arith::AddFOp::create(qb, rowState[0],
                                math::LogOp::create(qb, rowState[1])));
      Value inv = arith::SelectOp::create(
          qb, empty, zeroF,
          arith::DivFOp::create(qb, f32Const(qb, 1.0f), rowState[1]));
      Type elem = qType.getElementType();
      Value outAcc = buildLoop(
          qb, zero, indexConst(qb, dv), {st[0]},
          [&](ImplicitLocOpBuilder &lb, Value e, ValueRange a) {
            Value x = arith::MulFOp::create(
                lb, tensor::ExtractOp::create(lb, rowState[2], e), inv);
            if (elem != lb.getF32Type())
              x = arith::TruncFOp::create(lb, elem, x);
            return SmallVector<Value>{
                tensor::InsertOp::create(lb, x, a[0], ValueRange{bi, h, i, e})
                    .getResult()};
          })[0];
      Value lseAcc =
          tensor::InsertOp::create(qb, lseValue, st[1], ValueRange{bi, h, i});
      return {outAcc, lseAcc};
    };

    auto loopOver = [&](ImplicitLocOpBuilder &lb, Value extent, ValueRange acc,
                        LoopBody body) {
      return buildLoop(lb, zero, extent, acc, body);
    };
    auto result =
        loopOver(b, batch, {out, lse},
                 [&](ImplicitLocOpBuilder &b0, Value bi, ValueRange a0) {
                   return loopOver(
                       b0, indexConst(b0, queryHeads), a0,
                       [&](ImplicitLocOpBuilder &b1, Value h, ValueRange a1) {
                         return loopOver(b1, numQueries, a1,
                                         [&](ImplicitLocOpBuilder &b2, Value i,
                                             ValueRange a2) {
                                           return perQuery(b2, bi, h, i, a2);
                                         });
                       });
                 });
    rewriter.replaceOp(op, result);
    return success();
  }

private:
  /// Online-softmax update of `state` with keys [first, end) of KV head kv.
  static SmallVector<Value> attendKeys(ImplicitLocOpBuilder &b,
                                       SparseAttentionOp op, Softmax state,
                                       Value bi, Value h, Value kv, Value i,
                                       Value first, Value end, Value scale,
                                       int64_t d, int64_t dv) {
    Value zero = indexConst(b, 0);
    return buildLoop(
        b, first, end, {state.max, state.sum, state.acc},
        [&](ImplicitLocOpBuilder &lb, Value j, ValueRange s) {
          Value dot = buildLoop(
              lb, zero, indexConst(lb, d), {f32Const(lb, 0.0f)},
              [&](ImplicitLocOpBuilder &db, Value c, ValueRange a) {
                Value qc = extractF32(db, op.getQueries(), {bi, h, i, c});
                Value kc = extractF32(db, op.getKeys(), {bi, kv, j, c});
                return SmallVector<Value>{arith::AddFOp::create(
                    db, a[0], arith::MulFOp::create(db, qc, kc))};
              })[0];
          Value x = arith::MulFOp::create(lb, dot, scale);
          Value max = arith::MaximumFOp::create(lb, s[0], x);
          // exp(old max - new max) rescales what was accumulated.
          Value keep =
              math::ExpOp::create(lb, arith::SubFOp::create(lb, s[0], max));
          Value p = math::ExpOp::create(lb, arith::SubFOp::create(lb, x, max));
          Value sum = arith::AddFOp::create(
              lb, arith::MulFOp::create(lb, s[1], keep), p);
          Value acc = buildLoop(
              lb, zero, indexConst(lb, dv), {s[2]},
              [&](ImplicitLocOpBuilder &vb, Value e, ValueRange a) {
                Value ve = extractF32(vb, op.getValues(), {bi, kv, j, e});
                Value old = tensor::ExtractOp::create(vb, a[0], e);
                Value next = arith::AddFOp::create(
                    vb, arith::MulFOp::create(vb, old, keep),
                    arith::MulFOp::create(vb, p, ve));
                return SmallVector<Value>{
                    tensor::InsertOp::create(vb, next, a[0], e).getResult()};
              })[0];
          return SmallVector<Value>{max, sum, acc};
        });
  }
};
/// Token-major: the same op head-major between transposes.
struct TokenMajorSparseAttention : OpRewritePattern<SparseAttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SparseAttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getTokenMajor())
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    auto headMajor = SparseAttentionOp::create(
        b,
        TypeRange{swapHeadsAndTokens(op.getOutput().getType()),
                  swapHeadsAndTokens(op.getLse().getType())},
        swapHeadsAndTokens(b, op.getQueries()),
        swapHeadsAndTokens(b, op.getKeys()),
        swapHeadsAndTokens(b, op.getValues()),
        swapHeadsAndTokens(b, op.getSelection()), op.getQueryOffset(),
        op.getBlockSize(), op.getScaleAttr(), /*token_major=*/false);
    rewriter.replaceOp(op, {swapHeadsAndTokens(b, headMajor.getOutput()),
                            swapHeadsAndTokens(b, headMajor.getLse())});
    return success();
  }
};
} // namespace

void mlir::pisa::populateAttentionToLoopsPatterns(RewritePatternSet &patterns) {
  patterns.add<SparseAttentionToLoops, TokenMajorSparseAttention>(
      patterns.getContext());
}
