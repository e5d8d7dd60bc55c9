//===- DeviceSelection.h - Per-query selection inside kernels ---*- C++ -*-===//
//
// The data-dependent parts of hier_topk as device code for one thread and
// one query: the walk from the root to the leaf contenders, and the final
// selection (forced blocks + best contenders, written ascending). State
// lives in small private arrays; the level loop is unrolled at compile time
// so every level's sizes, offsets and spans are constants.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_DEVICESELECTION_H
#define PISA_LIB_CONVERSION_PISATOGPU_DEVICESELECTION_H

#include "../Common/NodeScore.h"

#include "pisa/Analysis/PyramidLayout.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::pisa::detail {

struct WalkConfig {
  const PyramidLayout &layout;
  int64_t topK;
};

/// Private scratch of one query: candidates [g*K] i32, kept [K] i32,
/// scores [g*K] f32.
struct QueryScratch {
  Value cand, kept, scores;
};

/// Sum over groups of `width` consecutive lanes (xor butterfly); every lane
/// of a group gets its group's total. width is a power of two <= 32.
Value laneGroupSum(ImplicitLocOpBuilder &b, Value v, int64_t width);

/// b_t = min(t / C, M_1 - 1).
Value leafOfPosition(ImplicitLocOpBuilder &b, const PyramidLayout &layout,
                     Value position);

/// Walks levels L..2 scoring with `summaries` (the packed pyramid), then
/// filters the leaves. Leaves the contenders (causal leaves outside the
/// forced set, ascending) in scratch.cand and returns their count.
Value buildWalk(ImplicitLocOpBuilder &b, const WalkConfig &config,
                const ScoreOperands &summaries, const QuerySite &site,
                Value bt, const QueryScratch &scratch);

/// Slots left for contenders: K - |{0, b_t - 1, b_t} within 0..b_t|.
Value contenderSlots(ImplicitLocOpBuilder &b, int64_t topK, Value bt);

using IndexLoader = llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)>;
using IndexStorer =
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value pos, Value value)>;

/// Writes one output row: the forced blocks and the best `slots`
/// contenders (all of them when there are no more than `slots`; ties to the
/// lower index), ascending, padded with -1 to K. `loadCand` / `loadScore`
/// read contender a and its score (scores are read only when ranking is
/// needed); `kept` is private [K] i32 scratch.
void buildFinalSelection(ImplicitLocOpBuilder &b, int64_t topK, Value bt,
                         Value numContenders, IndexLoader loadCand,
                         IndexLoader loadScore, Value kept, IndexStorer store);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_DEVICESELECTION_H
