//===- LaneWalk.h - A query's walk with one candidate per lane --*- C++ -*-===//
//
// When a level holds at most 32 candidates (g * K <= 32) a warp keeps the
// walk's state in registers: lane a holds candidate a (candidates ascend, so
// the causal ones are a prefix found by a ballot), ranks it against the
// others with shuffles (buildRank's tie rule: lower index wins), and the
// kept set is a ballot whose children are the next candidates. How a level
// is scored is the caller's: on tensor cores by one warp (WarpWalkMMA.cpp),
// or split over the warps of a query's block (SingleStageToGPU.cpp). The
// final selection (the forced blocks and the best contenders, ascending)
// runs on the lanes too.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_SELECTION_LANEWALK_H
#define PISA_LIB_CONVERSION_PISATOGPU_SELECTION_LANEWALK_H

#include "Selection/DeviceSelection.h"

#include "../Common/LevelLayout.h"

#include "pisa/Analysis/TensorCoreWalk.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::pisa::detail {

// kMaxLaneCandidates: pisa/Analysis/TensorCoreWalk.h.

/// Whether a walk of fanout g and top-K fits one candidate per lane.
inline bool fitsLaneWalk(int64_t fanout, int64_t topK) {
  return fanout * topK <= kMaxLaneCandidates;
}

/// Bit l set for the lanes l where `pred` holds (i32).
Value ballot(ImplicitLocOpBuilder &b, Value pred);
/// Set bits of an i32 mask, as an index.
Value popCount(ImplicitLocOpBuilder &b, Value mask);
/// The bits of `mask` below bit `n` (an i32 count < 32).
Value bitsBelow(ImplicitLocOpBuilder &b, Value mask, Value n);
/// The position of the k-th (from 0) set bit of `mask`, as an index.
Value nthSetBit(ImplicitLocOpBuilder &b, Value mask, Value k);

/// Candidate a's node (an index; `a` may differ between lanes).
using LaneNodeOf = llvm::function_ref<Value(ImplicitLocOpBuilder &, Value a)>;

/// The score of this lane's candidate at a level that must be ranked, its
/// children at `level`; any value on lanes at or past `numCausal`. Runs on
/// every lane of every warp of the query (it may hold barriers).
using LaneLevelScorer =
    llvm::function_ref<Value(ImplicitLocOpBuilder &, const ChildLevel &level,
                             Value numCausal, LaneNodeOf nodeOf)>;

/// The leaves a lane walk ends on: lane a's leaf (an index; any value past
/// the last), whether it is a contender (causal, not forced) and the ballot
/// of the contenders (popCount: how many). Contenders ascend with the lane.
struct LaneLeaves {
  Value leaf, contender, mask;
};

/// A ranked level's kept set (a ballot) and, when the ranker hands it out,
/// this lane's source: the lane of the (lane / g)-th kept candidate (an
/// index; null: the walk searches the set for it).
struct LaneKept {
  Value mask, source;
};

/// The kept set of a ranked level from `rankKept`, which ranks this lane's
/// candidate: run on one warp of the query and handed to the others (it
/// may hold barriers), so that the warps of a block do not all rank alike.
using LaneRankOnce = llvm::function_ref<LaneKept(
    ImplicitLocOpBuilder &,
    llvm::function_ref<Value(ImplicitLocOpBuilder &)> rankKept)>;

/// Item i's score (i a constant below g K), where the ranker can read it
/// without a shuffle; each use says what its items are, and the value must
/// equal what the lane holding item i ranks with (any value for items that
/// do not compete).
using LaneScoreAt = llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)>;

/// Walks levels L..2 from the root, `score` ranking a level when it has
/// more than K causal candidates, then filters the leaves. Without
/// `rankOnce` every warp that runs the walk ranks; with `scoreAt` (item a:
/// candidate a) the ranker reads the others' scores there instead of
/// shuffling them.
LaneLeaves buildLaneWalk(ImplicitLocOpBuilder &b, Value lane,
                         const LevelLayout &layout, int64_t topK,
                         int64_t fanout, Value bt, LaneLevelScorer score,
                         LaneRankOnce rankOnce = nullptr,
                         LaneScoreAt scoreAt = nullptr);

/// Writes a query's row (docs/semantics.md, section 3, step 3): the forced
/// blocks and the best `slots` contenders of `leaves` (all when there are no
/// more), ascending, padded with -1 to K. `score` is this lane's contender
/// score, read only when the contenders are ranked; `ranked` must be
/// popCount(mask) > contenderSlots; `candidates` is g * K. store(pos, value)
/// runs on the lane that owns an entry (K <= 32 lanes). With `scoreAt` (q: the
/// q-th contender, the q-th set bit of the mask) the ranking reads the
/// others' scores there instead of shuffling them.
void buildLaneFinalSelection(ImplicitLocOpBuilder &b, Value lane, int64_t topK,
                             int64_t candidates, Value bt,
                             const LaneLeaves &leaves, Value ranked,
                             Value score, IndexStorer store,
                             LaneScoreAt scoreAt = nullptr);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_SELECTION_LANEWALK_H
