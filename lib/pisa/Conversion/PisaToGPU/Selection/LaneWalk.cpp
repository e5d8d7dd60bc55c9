//===- LaneWalk.cpp - A query's walk with one candidate per lane ----------===//

#include "Selection/LaneWalk.h"

#include "Kernels/KernelBuilder.h"

#include "../Common/ForcedBlocks.h"
#include "../Common/LoopBuilders.h"
#include "../Common/NodeScore.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::pisa::detail;

Value mlir::pisa::detail::ballot(ImplicitLocOpBuilder &b, Value pred) {
  return NVVM::VoteSyncOp::create(b, b.getI32Type(),
                                  arith::ConstantIntOp::create(b, -1, 32), pred,
                                  NVVM::VoteSyncKind::ballot);
}

Value mlir::pisa::detail::popCount(ImplicitLocOpBuilder &b, Value mask) {
  return toIndex(b, math::CtPopOp::create(b, mask));
}

Value mlir::pisa::detail::bitsBelow(ImplicitLocOpBuilder &b, Value mask,
                                    Value n) {
  Value one = arith::ConstantIntOp::create(b, 1, 32);
  return arith::AndIOp::create(
      b, mask, arith::SubIOp::create(b, arith::ShLIOp::create(b, one, n), one));
}

Value mlir::pisa::detail::nthSetBit(ImplicitLocOpBuilder &b, Value mask,
                                    Value k) {
  Value lo = arith::ConstantIntOp::create(b, 0, 32);
  Value k32 = toI32(b, k);
  for (int64_t step : {16, 8, 4, 2, 1}) {
    Value mid =
        arith::AddIOp::create(b, lo, arith::ConstantIntOp::create(b, step, 32));
    Value below = math::CtPopOp::create(b, bitsBelow(b, mask, mid));
    lo = arith::SelectOp::create(
        b, cmp(b, arith::CmpIPredicate::ule, below, k32), mid, lo);
  }
  return toIndex(b, lo);
}

namespace {
/// How many lanes `other` < `lanes` for which `competes(other)` holds
/// outrank this lane's `mine` (rankable): a higher score, or an equal one
/// at a lower lane (buildRank's tie rule; lanes ascend with the index).
Value laneRank(
    ImplicitLocOpBuilder &b, Value lane, Value mine, int64_t lanes,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> competes,
    LaneScoreAt scoreAt = nullptr) {
  Value rank = indexConst(b, 0), one = indexConst(b, 1);
  for (int64_t other = 0; other < lanes; ++other) {
    Value theirs = scoreAt ? rankableScore(b, scoreAt(b, indexConst(b, other)))
                           : shuffleFrom(b, mine, indexConst(b, other));
    Value beats = arith::OrIOp::create(
        b, arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, theirs, mine),
        arith::AndIOp::create(
            b,
            arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, theirs, mine),
            cmp(b, arith::CmpIPredicate::ugt, lane, indexConst(b, other))));
    Value counts =
        arith::AndIOp::create(b, beats, competes(b, indexConst(b, other)));
    rank = arith::SelectOp::create(b, counts,
                                   arith::AddIOp::create(b, rank, one), rank);
  }
  return rank;
}
} // namespace

/// A level's kept candidates: every causal one, or the K best when there
/// are more (`ranked`: `score` gives this lane's candidate's score, ranked
/// among the lanes where `isCandidate`). Returns the kept mask and this
/// lane's source, the `lanePair`-th kept candidate's lane (the kept set is
/// a prefix while `whole`: no level has been ranked).
static SmallVector<Value> keepCandidates(
    ImplicitLocOpBuilder &b, Value lane, Value ranked, Value causal,
    Value whole, Value lanePair, int64_t maxCandidates, Value cK,
    llvm::function_ref<Value(ImplicitLocOpBuilder &)> score,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> isCandidate,
    LaneRankOnce rankOnce, LaneScoreAt scoreAt) {
  return buildIf(
      b, ranked, {b.getI32Type(), b.getIndexType()},
      [&](ImplicitLocOpBuilder &rb) {
        Value mine = rankableScore(rb, score(rb));
        auto rankKept = [&](ImplicitLocOpBuilder &kb) -> Value {
          Value rank =
              laneRank(kb, lane, mine, maxCandidates, isCandidate, scoreAt);
          return ballot(kb, arith::AndIOp::create(
                                kb, causal,
                                cmp(kb, arith::CmpIPredicate::ult, rank, cK)));
        };
        LaneKept k =
            rankOnce ? rankOnce(rb, rankKept) : LaneKept{rankKept(rb), nullptr};
        if (!k.source)
          k.source = nthSetBit(rb, k.mask, lanePair);
        return SmallVector<Value>{k.mask, k.source};
      },
      [&](ImplicitLocOpBuilder &eb) {
        Value mask = ballot(eb, causal);
        // While no level has been ranked the kept set is a prefix.
        Value source = buildIf(
            eb, whole, {eb.getIndexType()},
            [&](ImplicitLocOpBuilder &) {
              return SmallVector<Value>{lanePair};
            },
            [&](ImplicitLocOpBuilder &sb) {
              return SmallVector<Value>{nthSetBit(sb, mask, lanePair)};
            })[0];
        return SmallVector<Value>{mask, source};
      });
}

LaneLeaves mlir::pisa::detail::buildLaneWalk(
    ImplicitLocOpBuilder &b, Value lane, const LevelLayout &layout,
    int64_t topK, int64_t fanout, Value bt, LaneLevelScorer score,
    LaneRankOnce rankOnce, LaneScoreAt scoreAt) {
  const int64_t maxCandidates = fanout * topK;
  Value one = indexConst(b, 1);
  Value cK = indexConst(b, topK), cFan = indexConst(b, fanout);
  // Lane a's candidate node (i32), how many candidates there are, and
  // whether every level so far kept all its causal candidates.
  auto step = [&](ImplicitLocOpBuilder &b, const LevelLayout::Step &level,
                  ValueRange state) -> SmallVector<Value> {
    Value cand = state[0], numCand = state[1], whole = state[2];
    auto nodeOf = [&](ImplicitLocOpBuilder &lb, Value a) -> Value {
      return toIndex(lb, shuffleFrom(lb, cand, a));
    };
    Value node = toIndex(b, cand);
    Value exists = cmp(b, arith::CmpIPredicate::ult, lane, numCand);
    // Candidates ascend, so the causal ones are a prefix.
    Value causal = arith::AndIOp::create(
        b, exists,
        cmp(b, arith::CmpIPredicate::ule,
            arith::MulIOp::create(b, node, level.span), bt));
    Value numCausal = popCount(b, ballot(b, causal));
    const ChildLevel &children = level.children;
    Value childCount = children.numChildren;
    Value ranked = cmp(b, arith::CmpIPredicate::ugt, numCausal, cK);
    Value lanePair = arith::DivUIOp::create(b, lane, cFan);
    SmallVector<Value> kept = keepCandidates(
        b, lane, ranked, causal, whole, lanePair, maxCandidates, cK,
        [&](ImplicitLocOpBuilder &rb) {
          return score(rb, children, numCausal, nodeOf);
        },
        [&](ImplicitLocOpBuilder &cb, Value other) {
          return cmp(cb, arith::CmpIPredicate::ult, other, numCausal);
        },
        rankOnce, scoreAt);
    Value numKept = popCount(b, kept[0]);
    // Lane j takes child j % g of its source. While no level has been
    // ranked the candidates are nodes 0, 1, ... in lane order and all
    // causal ones are kept, so that child is node j: the top levels of
    // every walk skip the search and the shuffle.
    Value stillWhole = arith::AndIOp::create(
        b, whole,
        arith::XOrIOp::create(b, ranked,
                              arith::ConstantIntOp::create(b, 1, 1)));
    Value child = buildIf(
        b, stillWhole, {b.getIndexType()},
        [&](ImplicitLocOpBuilder &) { return SmallVector<Value>{lane}; },
        [&](ImplicitLocOpBuilder &sb) {
          return SmallVector<Value>{arith::AddIOp::create(
              sb, arith::MulIOp::create(sb, nodeOf(sb, kept[1]), cFan),
              arith::RemUIOp::create(sb, lane, cFan))};
        })[0];
    Value next = arith::AndIOp::create(
        b,
        cmp(b, arith::CmpIPredicate::ult, lane,
            arith::MulIOp::create(b, numKept, cFan)),
        cmp(b, arith::CmpIPredicate::ult, child, childCount));
    return SmallVector<Value>{toI32(b, child), popCount(b, ballot(b, next)),
                              stillWhole};
  };
  SmallVector<Value> walked =
      layout.walkDown(b,
                      {arith::ConstantIntOp::create(b, 0, 32), one,
                       arith::ConstantIntOp::create(b, 1, 1)},
                      step);
  Value cand = walked[0], numCand = walked[1];
  // Leaves: the causal ones outside the forced set {0, b_t - 1, b_t}.
  LaneLeaves leaves;
  leaves.leaf = toIndex(b, cand);
  leaves.contender = arith::AndIOp::create(
      b, cmp(b, arith::CmpIPredicate::ult, lane, numCand),
      isLeafContender(b, leaves.leaf, bt, previousBlock(b, bt)));
  leaves.mask = ballot(b, leaves.contender);
  return leaves;
}

/// Whether this lane's leaf is kept: a contender, and among the `slots`
/// best when there are more (`ranked`), its score `score`.
static Value keepContenders(ImplicitLocOpBuilder &b, Value lane,
                            int64_t candidates, const LaneLeaves &leaves,
                            Value ranked, Value score, Value slots,
                            LaneScoreAt scoreAt) {
  using P = arith::CmpIPredicate;
  Value lane32 = toI32(b, lane);
  return buildIf(
      b, ranked, {b.getI1Type()},
      [&](ImplicitLocOpBuilder &rb) {
        Value mine = rankableScore(rb, score);
        Value rank;
        if (scoreAt) {
          // Contenders ascend with the lane, so ranking them by their
          // position among the contenders keeps the tie rule.
          Value count = popCount(rb, leaves.mask);
          rank = laneRank(
              rb, popCount(rb, bitsBelow(rb, leaves.mask, lane32)), mine,
              candidates,
              [&](ImplicitLocOpBuilder &cb, Value q) {
                return cmp(cb, P::ult, q, count);
              },
              scoreAt);
        } else {
          rank = laneRank(rb, lane, mine, candidates,
                          [&](ImplicitLocOpBuilder &cb, Value other) {
                            Value bit = arith::AndIOp::create(
                                cb, leaves.mask,
                                arith::ShLIOp::create(
                                    cb, arith::ConstantIntOp::create(cb, 1, 32),
                                    toI32(cb, other)));
                            return cmp(cb, P::ne, bit,
                                       arith::ConstantIntOp::create(cb, 0, 32));
                          });
        }
        return SmallVector<Value>{arith::AndIOp::create(
            rb, leaves.contender, cmp(rb, P::ult, rank, slots))};
      },
      [&](ImplicitLocOpBuilder &) {
        return SmallVector<Value>{leaves.contender};
      })[0];
}

void mlir::pisa::detail::buildLaneFinalSelection(
    ImplicitLocOpBuilder &b, Value lane, int64_t topK, int64_t candidates,
    Value bt, const LaneLeaves &leaves, Value ranked, Value score,
    IndexStorer store, LaneScoreAt scoreAt) {
  using P = arith::CmpIPredicate;
  Value zero = indexConst(b, 0), one = indexConst(b, 1), two = indexConst(b, 2);
  Value lane32 = toI32(b, lane);
  Value slots = contenderSlots(b, topK, bt);
  // Kept: every contender, or the `slots` best when there are more.
  Value keep = keepContenders(b, lane, candidates, leaves, ranked, score, slots,
                              scoreAt);
  Value keptMask = ballot(b, keep);
  Value numKept = popCount(b, keptMask);
  Value hasBt = cmp(b, P::uge, bt, one);
  Value hasBtMinus1 = cmp(b, P::uge, bt, two);
  Value btMinus1 = previousBlock(b, bt);
  // A kept contender's position: kept ones below it (they ascend with the
  // lane) + the forced blocks below it.
  buildIfThen(b, keep, [&](ImplicitLocOpBuilder &kb) {
    Value x = leaves.leaf;
    Value forcedBelow = forcedBlocksBelow(kb, x, bt, btMinus1);
    store(kb,
          arith::AddIOp::create(
              kb, popCount(kb, bitsBelow(kb, keptMask, lane32)), forcedBelow),
          x);
  });
  // Forced block f's position: kept contenders below f + forced below f;
  // lane 0 writes block 0, lane 1 b_t - 1, lane 2 b_t.
  auto keptBelow = [&](Value f) {
    return popCount(b, ballot(b, arith::AndIOp::create(
                                     b, keep, cmp(b, P::ult, leaves.leaf, f))));
  };
  Value belowPrevious = keptBelow(btMinus1), belowBt = keptBelow(bt);
  buildIfThen(b, cmp(b, P::eq, lane, zero),
              [&](ImplicitLocOpBuilder &fb) { store(fb, zero, zero); });
  buildIfThen(
      b, arith::AndIOp::create(b, hasBtMinus1, cmp(b, P::eq, lane, one)),
      [&](ImplicitLocOpBuilder &fb) {
        store(fb, arith::AddIOp::create(fb, belowPrevious, one), btMinus1);
      });
  buildIfThen(b, arith::AndIOp::create(b, hasBt, cmp(b, P::eq, lane, two)),
              [&](ImplicitLocOpBuilder &fb) {
                store(fb,
                      arith::AddIOp::create(
                          fb, belowBt,
                          arith::SelectOp::create(fb, hasBtMinus1, two, one)),
                      bt);
              });
  // -1 past the kept and forced blocks.
  Value used = arith::AddIOp::create(
      b, numKept, arith::SubIOp::create(b, indexConst(b, topK), slots));
  buildIfThen(
      b,
      arith::AndIOp::create(b, cmp(b, P::uge, lane, used),
                            cmp(b, P::ult, lane, indexConst(b, topK))),
      [&](ImplicitLocOpBuilder &pb) { store(pb, lane, indexConst(pb, -1)); });
}
