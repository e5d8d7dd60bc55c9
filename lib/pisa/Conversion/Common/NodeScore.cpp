//===- NodeScore.cpp - IR for one group-summed LSE node score -------------===//
//
// The LSE is computed online (running max and rescaled sum) in one pass
// over the children. The loop bound is the number of valid children, so
// causal masking costs no branch. The dot product carries reassoc/contract
// so that LLVM vectorises it; the result is still deterministic, and equal
// inputs give bit-equal scores, which the tie rule relies on.
//
//===----------------------------------------------------------------------===//

#include "NodeScore.h"
#include "LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;
using namespace mlir::pisa::detail;

SmallVector<Value> mlir::pisa::detail::onlineLseUpdate(ImplicitLocOpBuilder &b,
                                                       Value max, Value sum,
                                                       Value x) {
  Value m = arith::MaximumFOp::create(b, max, x);
  Value rescale = math::ExpOp::create(b, arith::SubFOp::create(b, max, m));
  Value term = math::ExpOp::create(b, arith::SubFOp::create(b, x, m));
  return {m, arith::AddFOp::create(b, arith::MulFOp::create(b, sum, rescale),
                                   term)};
}

Value mlir::pisa::detail::rankableScore(ImplicitLocOpBuilder &b, Value score) {
  Value isNaN =
      arith::CmpFOp::create(b, arith::CmpFPredicate::UNO, score, score);
  Value negInf = arith::ConstantOp::create(
      b, b.getFloatAttr(score.getType(),
                        -std::numeric_limits<double>::infinity()));
  return arith::SelectOp::create(b, isNaN, negInf, score);
}

Value mlir::pisa::detail::buildRank(
    ImplicitLocOpBuilder &b, Value count, Value a,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> scoreAt) {
  Value zero = indexConst(b, 0), one = indexConst(b, 1);
  // With a NaN, OGT and OEQ are both false: a NaN would outrank nothing and
  // be outranked by nothing, and more than `slots` candidates would be
  // kept, past the end of the arrays that hold them.
  Value mine = rankableScore(b, scoreAt(b, a));
  return buildLoop(
      b, zero, count, {zero},
      [&](ImplicitLocOpBuilder &rb, Value o, ValueRange r) {
        Value theirs = rankableScore(rb, scoreAt(rb, o));
        Value higher =
            arith::CmpFOp::create(rb, arith::CmpFPredicate::OGT, theirs, mine);
        Value tie = arith::AndIOp::create(
            rb,
            arith::CmpFOp::create(rb, arith::CmpFPredicate::OEQ, theirs, mine),
            arith::CmpIOp::create(rb, arith::CmpIPredicate::ult, o, a));
        Value beats = arith::OrIOp::create(rb, higher, tie);
        return SmallVector<Value>{arith::SelectOp::create(
            rb, beats, arith::AddIOp::create(rb, r[0], one), r[0])};
      })[0];
}

Value mlir::pisa::detail::buildKeep(
    ImplicitLocOpBuilder &b, Value count, Value a, Value slots, Value ranked,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> scoreAt) {
  return buildIf(
      b, ranked, {b.getI1Type()},
      [&](ImplicitLocOpBuilder &tb) {
        Value rank = buildRank(tb, count, a, scoreAt);
        return SmallVector<Value>{
            arith::CmpIOp::create(tb, arith::CmpIPredicate::ult, rank, slots)};
      },
      [&](ImplicitLocOpBuilder &eb) {
        return SmallVector<Value>{
            arith::ConstantIntOp::create(eb, 1, 1).getResult()};
      })[0];
}

std::pair<Value, Value>
mlir::pisa::detail::validChildren(ImplicitLocOpBuilder &b,
                                  const QuerySite &site,
                                  const ChildLevel &level, Value node) {
  Value zero = indexConst(b, 0), one = indexConst(b, 1);
  Value first = arith::MulIOp::create(b, node, level.fanout);
  // Existing children: clamp(numChildren - first, 0, fanout).
  Value left = arith::SubIOp::create(b, level.numChildren, first);
  Value existing = arith::MinSIOp::create(
      b, level.fanout, arith::MaxSIOp::create(b, left, zero));
  // Causal children: r * keysPerChild <= t  <=>  r <= t / keysPerChild.
  Value lastCausal =
      arith::DivUIOp::create(b, site.position, level.keysPerChild);
  Value causal = arith::MaxSIOp::create(
      b,
      arith::SubIOp::create(b, arith::AddIOp::create(b, lastCausal, one),
                            first),
      zero);
  return {first, arith::MinSIOp::create(b, existing, causal)};
}

Value mlir::pisa::detail::buildGroupScore(ImplicitLocOpBuilder &b,
                                          const ScoreOperands &operands,
                                          const QuerySite &site,
                                          const ChildLevel &level, Value node) {
  Value zero = indexConst(b, 0);
  auto children = validChildren(b, site, level, node);
  Value first = children.first, count = children.second;

  auto fastDot = arith::FastMathFlags::reassoc | arith::FastMathFlags::contract;
  Value zeroF = f32Const(b, 0.0f);
  Value negInf = f32Const(b, -std::numeric_limits<float>::infinity());
  Value scale = f32Const(b, operands.scale);
  Value headDim = indexConst(b, operands.headDim);
  Value groupBase =
      arith::MulIOp::create(b, site.kvHead, indexConst(b, operands.groupSize));
  Value rowBase = arith::AddIOp::create(b, level.rowBase, first);

  auto headSum = buildLoop(
      b, zero, indexConst(b, operands.groupSize), {zeroF},
      [&](ImplicitLocOpBuilder &hb, Value h, ValueRange acc) {
        Value qHead = arith::AddIOp::create(hb, groupBase, h);
        auto maxAndSum = buildLoop(
            hb, zero, count, {negInf, zeroF},
            [&](ImplicitLocOpBuilder &cb, Value c, ValueRange state) {
              Value row = arith::AddIOp::create(cb, rowBase, c);
              Value first = operands.lanes > 1 ? operands.lane : zero;
              Value step = indexConst(cb, operands.lanes);
              auto dot = buildLoop(
                  cb, first, headDim, step, {zeroF},
                  [&](ImplicitLocOpBuilder &db, Value e, ValueRange sum) {
                    Value qv = extractF32(db, operands.queries,
                                          {site.batch, qHead, site.query, e});
                    Value kv = extractF32(db, operands.children,
                                          level.at(db, site, row, e));
                    Value prod = arith::MulFOp::create(db, qv, kv, fastDot);
                    return SmallVector<Value>{
                        arith::AddFOp::create(db, sum[0], prod, fastDot)};
                  });
              if (operands.lanes > 1)
                dot[0] = operands.laneSum(cb, dot[0]);
              Value x = arith::MulFOp::create(cb, dot[0], scale);
              return onlineLseUpdate(cb, state[0], state[1], x);
            });
        // Empty: -inf + log(0) = -inf.
        Value lse = arith::AddFOp::create(
            hb, maxAndSum[0], math::LogOp::create(hb, maxAndSum[1]));
        return SmallVector<Value>{arith::AddFOp::create(hb, acc[0], lse)};
      });
  return headSum[0];
}
