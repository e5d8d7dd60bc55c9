//===- DeviceSelection.h - Per-query selection inside kernels ---*- C++ -*-===//
//
// The data-dependent parts of hier_topk as device code for one thread and
// one query: the walk from the root to the leaf contenders, and the final
// selection (forced blocks + best contenders, written ascending). State
// lives in small private arrays; the level loop is unrolled with constant
// sizes, offsets and spans when N is static (LevelLayout), else a loop.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_SELECTION_DEVICESELECTION_H
#define PISA_LIB_CONVERSION_PISATOGPU_SELECTION_DEVICESELECTION_H

#include "../Common/LevelLayout.h"
#include "../Common/NodeScore.h"

#include "pisa/Analysis/PyramidLayout.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <functional>
#include <optional>

namespace mlir::pisa::detail {

struct WalkConfig {
  const LevelLayout &layout;
  int64_t topK;
};

/// Private scratch of one query: candidates [g*K] i32, kept [K] i32,
/// scores [g*K] f32. A query served by `warps` > 1 warps of a block (all
/// of which keep the same state) splits its scoring loops over them: warp
/// `warp` scores items warp, warp + warps, ..., its lane 0 writes them to
/// `shared` ([g*K] f32, workgroup) and every warp reads them all back;
/// the block's threads then rank the scored items, one each, into
/// `sharedRank` ([g*K] i32, workgroup), which the next selection reads
/// instead of ranking every item against all others on every thread. The
/// lane walk instead ranks on warp 0 and hands its kept set (a ballot) to
/// the others in `sharedMask` ([1 + K] i32, workgroup: the ballot, then
/// the kept lanes in order).
struct QueryScratch {
  Value cand, kept, scores;
  Value shared = nullptr, sharedRank = nullptr, warp = nullptr, lane = nullptr;
  Value sharedMask = nullptr;
  int64_t warps = 1;
};

/// Loads rank a from scratch.sharedRank (as an index), or null without it.
std::function<Value(ImplicitLocOpBuilder &, Value)>
sharedRankLoader(const QueryScratch &scratch);

/// shared[a] = scoreOf(a) for a < count, split over the query's warps
/// (warp w scores items w, w + warps, ...; its lane 0 writes them), between
/// two barriers: every warp of the query must call it alike.
void shareScores(
    ImplicitLocOpBuilder &b, const QueryScratch &scratch, Value count,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> scoreOf);

/// scratch.scores[a] = scoreOf(a) for a < count, split over the query's
/// warps when it has several (a barrier before and after their exchange;
/// `count` must be the same for all of them), and then their ranks in
/// scratch.sharedRank (buildRank's order).
void scoreCandidates(
    ImplicitLocOpBuilder &b, const QueryScratch &scratch, Value count,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> scoreOf);

/// b_t = min(t / C, M_1 - 1).
Value leafOfPosition(ImplicitLocOpBuilder &b, const LevelLayout &layout,
                     Value position);
/// The same with M_1 given (e.g. a buffer's size inside a kernel).
Value leafOfPosition(ImplicitLocOpBuilder &b, int64_t blockSize,
                     Value numLeaves, Value position);

/// Scores `node` given its child level (the group-summed LSE).
using NodeScorer = llvm::function_ref<Value(ImplicitLocOpBuilder &,
                                            const ChildLevel &, Value node)>;

/// Walks levels L..2 scoring nodes with `score` (children: the packed
/// pyramid), then filters the leaves. Leaves the contenders (causal leaves
/// outside the forced set, ascending) in scratch.cand; returns their count.
Value buildWalk(ImplicitLocOpBuilder &b, const WalkConfig &config,
                NodeScorer score, Value bt, const QueryScratch &scratch);

/// A query's G head rows held by a warp in registers, as f32. The lanes
/// form groups of `width` consecutive lanes; group hg holds heads hg * H ..
/// hg * H + H - 1 (H = P * width / 32, P = G rounded up to a power of two;
/// rows past G are zeros), and lane `part` of a group holds elements
/// elementOf(j), j < d / width, of each: vectors of `vec` consecutive
/// elements, one per width * vec. width = 32, vec = 1 (every head on every
/// lane, elements l, l + 32, ...) keeps a child row's loads to one element
/// per lane; a narrower group holds fewer heads, so a dot product needs
/// fewer shuffles to finish, for more of each child row per lane.
struct WarpQuery {
  SmallVector<SmallVector<Value>> rows; ///< [H][d / width]
  Value lane, part, headGroup;
  int64_t width = 32, vec = 1, groupSize = 0;
  /// P, and the heads of a group (H; P when width = 32, whose lanes hold
  /// only the G rows).
  int64_t padded() const;
  int64_t headsPerGroup() const;
  /// Element j of the lane's part of a row (an index).
  Value elementOf(ImplicitLocOpBuilder &b, int64_t j) const;
};

/// The narrow groups for a query block's warps (WarpQuery): 16 elements of
/// a row per lane where the heads allow (d / 16 lanes, at least 32 / P),
/// 4-element vectors; 32 when P * d / 32 > 64 registers.
int64_t narrowQueryWidth(int64_t groupSize, int64_t headDim);

/// Loads the rows when d is a multiple of 32, G <= 32 and they fit in 64
/// registers per lane (G * d / 32 <= 64); std::nullopt otherwise. `width`
/// is 32 or narrowQueryWidth().
std::optional<WarpQuery> loadWarpQuery(ImplicitLocOpBuilder &b, Value queries,
                                       const QuerySite &site, int64_t groupSize,
                                       int64_t headDim, Value lane,
                                       int64_t width = 32);

/// The group score of `node` by a warp holding its query in registers:
/// each child row is loaded once per lane group and multiplied against the
/// group's heads; a reduce-scatter across the group's lanes leaves each
/// head's dot product on its own lanes, which run that head's online LSE,
/// and the heads' LSEs are summed once per node. `rowsInFlight` > 1 loads
/// that many children's rows before folding them (the same folds in the
/// same order; fewer when a narrow group's rows would take more than 32
/// registers).
Value buildWarpGroupScore(ImplicitLocOpBuilder &b, const WarpQuery &query,
                          Value children, const QuerySite &site,
                          const ChildLevel &level, Value node, float scale,
                          int64_t rowsInFlight = 1);

/// Slots left for contenders: K - |{0, b_t - 1, b_t} within 0..b_t|.
Value contenderSlots(ImplicitLocOpBuilder &b, int64_t topK, Value bt);

using IndexLoader = llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)>;
using IndexStorer =
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value pos, Value value)>;

/// Writes one output row: the forced blocks and the best `slots`
/// contenders (all of them when there are no more than `slots`; ties to the
/// lower index), ascending, padded with -1 to K. `loadCand` / `loadScore`
/// read contender a and its score (scores are read only when ranking is
/// needed); `kept` is private [K] i32 scratch; `loadRank`, when given,
/// reads each contender's rank, ranked beforehand (scoreCandidates).
void buildFinalSelection(ImplicitLocOpBuilder &b, int64_t topK, Value bt,
                         Value numContenders, IndexLoader loadCand,
                         IndexLoader loadScore, Value kept, IndexStorer store,
                         IndexLoader loadRank = nullptr);

/// The most contenders buildFinalSelectionInRegisters holds (its ranks are
/// capacity^2 unrolled comparisons).
constexpr int64_t kRegisterContenders = 32;

/// buildFinalSelection's row for at most `capacity` (<=
/// kRegisterContenders, a static bound) contenders held in registers:
/// every contender's block and score is loaded at once (slots a >= count
/// are read but never used; so are the scores when no ranking is needed),
/// and each rank, kept position and forced position is an unrolled sum of
/// comparisons. The same row as buildFinalSelection, from a few hundred
/// independent instructions instead of capacity^2 dependent loads.
void buildFinalSelectionInRegisters(ImplicitLocOpBuilder &b, int64_t topK,
                                    int64_t capacity, Value bt,
                                    Value numContenders, IndexLoader loadCand,
                                    IndexLoader loadScore, IndexStorer store);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_SELECTION_DEVICESELECTION_H
