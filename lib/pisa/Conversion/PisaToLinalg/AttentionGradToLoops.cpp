//===- AttentionGradToLoops.cpp - sparse_attention_grad to scf loops ------===//
//
// The CPU reference of pisa.sparse_attention_grad (docs/semantics.md,
// section 6.1): loops over (batch, query head, query); per query D = dO . o,
// then over the keys its selection row attends (the forward's rule) the
// recomputed probability P = exp(scale q . k - lse) and dS = P (dO . v - D),
// adding scale dS k to the query's row of dq and scale dS q and P dO to the
// key's rows of dk and dv. Everything accumulates in f32 tensors; a
// gradient of a 16-bit type is rounded once, at the end. Nothing is N x N.
//
//===----------------------------------------------------------------------===//

#include "../Common/LoopBuilders.h"

#include "pisa/Conversion/PisaToLinalg/PisaToLinalg.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

namespace {

/// What the loops of one op share: its operands, sizes and constants.
struct GradSite {
  SparseAttentionGradOp op;
  int64_t groupSize, topK, d, dv;
  Value numKeys, numBlocks, cBlock, scale;
};

/// A zero f32 tensor of `type`'s shape (sizes of its dynamic dimensions
/// from `sizes`).
Value zerosF32(ImplicitLocOpBuilder &b, RankedTensorType type,
               ArrayRef<Value> sizes) {
  auto f32Type = RankedTensorType::get(type.getShape(), b.getF32Type());
  Value empty = emptyLike(b, f32Type, sizes);
  return linalg::FillOp::create(b, f32Const(b, 0.0f), empty).getResult(0);
}

/// sum over e < n of a[..., e] * c[..., e] (both read as f32).
Value dot(ImplicitLocOpBuilder &b, Value a, ValueRange aAt, Value c,
          ValueRange cAt, int64_t n) {
  return buildLoop(b, indexConst(b, 0), indexConst(b, n), {f32Const(b, 0.0f)},
                   [&](ImplicitLocOpBuilder &lb, Value e, ValueRange acc) {
                     SmallVector<Value> ai(aAt), ci(cAt);
                     ai.push_back(e);
                     ci.push_back(e);
                     Value x = arith::MulFOp::create(lb, extractF32(lb, a, ai),
                                                     extractF32(lb, c, ci));
                     return SmallVector<Value>{
                         arith::AddFOp::create(lb, acc[0], x)};
                   })[0];
}

/// tensor[at..., e] += factor * source[sourceAt..., e] for e < n.
Value addScaledRow(ImplicitLocOpBuilder &b, Value tensor, ValueRange at,
                   Value factor, Value source, ValueRange sourceAt, int64_t n) {
  return buildLoop(
      b, indexConst(b, 0), indexConst(b, n), {tensor},
      [&](ImplicitLocOpBuilder &lb, Value e, ValueRange acc) {
        SmallVector<Value> ti(at), si(sourceAt);
        ti.push_back(e);
        si.push_back(e);
        Value old = tensor::ExtractOp::create(lb, acc[0], ti);
        Value next = arith::AddFOp::create(
            lb, old,
            arith::MulFOp::create(lb, factor, extractF32(lb, source, si)));
        return SmallVector<Value>{
            tensor::InsertOp::create(lb, next, acc[0], ti).getResult()};
      })[0];
}

/// The f32 tensor `t` as `type` (its element type f32, or rounded to it).
Value castTo(ImplicitLocOpBuilder &b, Value t, RankedTensorType type,
             ArrayRef<Value> sizes) {
  if (type.getElementType().isF32())
    return t;
  Value out = emptyLike(b, type, sizes);
  auto map = b.getMultiDimIdentityMap(4);
  SmallVector<utils::IteratorType> parallel(4, utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, TypeRange{type}, ValueRange{t}, ValueRange{out},
             ArrayRef<AffineMap>{map, map}, parallel,
             [&](OpBuilder &nb, Location loc, ValueRange args) {
               Value x = arith::TruncFOp::create(nb, loc, type.getElementType(),
                                                 args[0]);
               linalg::YieldOp::create(nb, loc, x);
             })
      .getResult(0);
}

struct SparseAttentionGradToLoops : OpRewritePattern<SparseAttentionGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SparseAttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getTokenMajor())
      return rewriter.notifyMatchFailure(op, "token-major: transposed first");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    RankedTensorType qType = op.getQueries().getType();
    const int64_t queryHeads = qType.getDimSize(1);
    const int64_t kvHeads = op.getKeys().getType().getDimSize(1);
    GradSite s{op,
               queryHeads / kvHeads,
               op.getSelection().getType().getDimSize(3),
               qType.getDimSize(3),
               op.getValues().getType().getDimSize(3),
               dimOf(b, op.getKeys(), 2),
               Value(),
               indexConst(b, op.getBlockSize()),
               f32Const(b, op.getScaleOrDefault())};
    s.numBlocks = arith::CeilDivUIOp::create(b, s.numKeys, s.cBlock);
    Value batch = dimOf(b, op.getQueries(), 0);
    Value numQueries = dimOf(b, op.getQueries(), 2);
    SmallVector<Value> qSizes{batch, indexConst(b, queryHeads), numQueries,
                              indexConst(b, s.d)};
    SmallVector<Value> kSizes{batch, indexConst(b, kvHeads), s.numKeys,
                              indexConst(b, s.d)};
    SmallVector<Value> vSizes{batch, indexConst(b, kvHeads), s.numKeys,
                              indexConst(b, s.dv)};
    Value dq = zerosF32(b, op.getGradQueries().getType(), qSizes);
    Value dk = zerosF32(b, op.getGradKeys().getType(), kSizes);
    Value dv = zerosF32(b, op.getGradValues().getType(), vSizes);
    Value zero = indexConst(b, 0);
    SmallVector<Value> grads = buildLoop(
        b, zero, batch, {dq, dk, dv},
        [&](ImplicitLocOpBuilder &b0, Value bi, ValueRange a0) {
          return buildLoop(
              b0, zero, indexConst(b0, queryHeads), a0,
              [&](ImplicitLocOpBuilder &b1, Value h, ValueRange a1) {
                return buildLoop(
                    b1, zero, numQueries, a1,
                    [&](ImplicitLocOpBuilder &b2, Value i, ValueRange a2) {
                      return perQuery(b2, s, bi, h, i, a2);
                    });
              });
        });
    rewriter.replaceOp(
        op, {castTo(b, grads[0], op.getGradQueries().getType(), qSizes),
             castTo(b, grads[1], op.getGradKeys().getType(), kSizes),
             castTo(b, grads[2], op.getGradValues().getType(), vSizes)});
    return success();
  }

private:
  /// Query i of head h: its row of dq, its terms of dk and dv. `st` and the
  /// result are (dq, dk, dv).
  static SmallVector<Value> perQuery(ImplicitLocOpBuilder &b, const GradSite &s,
                                     Value bi, Value h, Value i,
                                     ValueRange st) {
    SparseAttentionGradOp op = s.op;
    Value zero = indexConst(b, 0), one = indexConst(b, 1);
    Value kv = arith::DivUIOp::create(b, h, indexConst(b, s.groupSize));
    Value t = arith::AddIOp::create(b, op.getQueryOffset(), i);
    // Keys past t or N are never attended.
    Value keyEnd =
        arith::MinUIOp::create(b, s.numKeys, arith::AddIOp::create(b, t, one));
    Value lse = tensor::ExtractOp::create(b, op.getLse(), ValueRange{bi, h, i});
    Value rowD = dot(b, op.getGradOutput(), {bi, h, i}, op.getOutput(),
                     {bi, h, i}, s.dv);
    // Over the selection row: entries used in order (docs/semantics.md 6).
    SmallVector<Value> row = buildLoop(
        b, zero, indexConst(b, s.topK),
        {st[0], st[1], st[2], indexConst(b, -1)},
        [&](ImplicitLocOpBuilder &eb, Value slot, ValueRange es) {
          Value raw = tensor::ExtractOp::create(eb, op.getSelection(),
                                                ValueRange{bi, kv, i, slot});
          Value block = arith::IndexCastOp::create(eb, eb.getIndexType(), raw);
          Value lastUsed = es[3];
          Value used = arith::AndIOp::create(
              eb,
              cmp(eb, arith::CmpIPredicate::sge, raw,
                  arith::ConstantIntOp::create(eb, 0, 32)),
              arith::AndIOp::create(
                  eb, cmp(eb, arith::CmpIPredicate::ult, block, s.numBlocks),
                  cmp(eb, arith::CmpIPredicate::sgt, block, lastUsed)));
          Type f32Tensor = es[0].getType();
          SmallVector<Value> next = buildIf(
              eb, used, {f32Tensor, es[1].getType(), es[2].getType()},
              [&](ImplicitLocOpBuilder &tb) {
                Value first = arith::MulIOp::create(tb, block, s.cBlock);
                Value end = arith::MinUIOp::create(
                    tb, keyEnd, arith::AddIOp::create(tb, first, s.cBlock));
                end = arith::MaxUIOp::create(tb, end, first);
                return attendKeys(tb, s, {es[0], es[1], es[2]}, bi, h, kv, i,
                                  first, end, lse, rowD);
              },
              [&](ImplicitLocOpBuilder &) {
                return SmallVector<Value>{es[0], es[1], es[2]};
              });
          return SmallVector<Value>{
              next[0], next[1], next[2],
              arith::SelectOp::create(eb, used, block, lastUsed)};
        });
    return {row[0], row[1], row[2]};
  }

  /// Keys [first, end) of KV head kv for query i of head h: dq[b, h, i] +=
  /// scale dS k_j, dk[b, kv, j] += scale dS q, dv[b, kv, j] += P dO.
  static SmallVector<Value> attendKeys(ImplicitLocOpBuilder &b,
                                       const GradSite &s, ValueRange grads,
                                       Value bi, Value h, Value kv, Value i,
                                       Value first, Value end, Value lse,
                                       Value rowD) {
    SparseAttentionGradOp op = s.op;
    Value negInf = f32Const(b, -std::numeric_limits<float>::infinity());
    Value emptyRow =
        arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, lse, negInf);
    return buildLoop(
        b, first, end, grads,
        [&](ImplicitLocOpBuilder &lb, Value j, ValueRange g) {
          Value logit =
              arith::MulFOp::create(lb,
                                    dot(lb, op.getQueries(), {bi, h, i},
                                        op.getKeys(), {bi, kv, j}, s.d),
                                    s.scale);
          Value p = arith::SelectOp::create(
              lb, emptyRow, f32Const(lb, 0.0f),
              math::ExpOp::create(lb, arith::SubFOp::create(lb, logit, lse)));
          Value dp = dot(lb, op.getGradOutput(), {bi, h, i}, op.getValues(),
                         {bi, kv, j}, s.dv);
          Value ds =
              arith::MulFOp::create(lb, p, arith::SubFOp::create(lb, dp, rowD));
          Value dq = addScaledRow(lb, g[0], {bi, h, i},
                                  arith::MulFOp::create(lb, s.scale, ds),
                                  op.getKeys(), {bi, kv, j}, s.d);
          Value dk = addScaledRow(lb, g[1], {bi, kv, j},
                                  arith::MulFOp::create(lb, s.scale, ds),
                                  op.getQueries(), {bi, h, i}, s.d);
          Value dv = addScaledRow(lb, g[2], {bi, kv, j}, p, op.getGradOutput(),
                                  {bi, h, i}, s.dv);
          return SmallVector<Value>{dq, dk, dv};
        });
  }
};

/// Token-major: the same op head-major between transposes.
struct TokenMajorSparseAttentionGrad : OpRewritePattern<SparseAttentionGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SparseAttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getTokenMajor())
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    auto swap = [&](Value v) { return swapHeadsAndTokens(b, v); };
    auto headMajor = SparseAttentionGradOp::create(
        b,
        TypeRange{swapHeadsAndTokens(op.getGradQueries().getType()),
                  swapHeadsAndTokens(op.getGradKeys().getType()),
                  swapHeadsAndTokens(op.getGradValues().getType())},
        swap(op.getQueries()), swap(op.getKeys()), swap(op.getValues()),
        swap(op.getSelection()), op.getQueryOffset(), swap(op.getOutput()),
        swap(op.getLse()), swap(op.getGradOutput()), op.getBlockSize(),
        op.getScaleAttr(), /*token_major=*/false);
    rewriter.replaceOp(op, {swap(headMajor.getGradQueries()),
                            swap(headMajor.getGradKeys()),
                            swap(headMajor.getGradValues())});
    return success();
  }
};
} // namespace

void mlir::pisa::populateAttentionGradToLoopsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<SparseAttentionGradToLoops, TokenMajorSparseAttentionGrad>(
      patterns.getContext());
}
