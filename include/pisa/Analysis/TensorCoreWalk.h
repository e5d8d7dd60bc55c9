//===- TensorCoreWalk.h - When the walk's levels run on mma.sync -*- C++
//-*-===//
//
// The two-stage walk scores a level on tensor cores (pisa.kernel.walk
// {tensor_cores}, WarpWalkMMA.h) with the query's G heads as one m16 tile,
// one candidate per lane and a candidate's two children in one lane's
// accumulator pair. The one definition of the shapes that allows, shared by
// the decomposition that chooses it and the verifier of a hand-written op.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_ANALYSIS_TENSORCOREWALK_H
#define PISA_ANALYSIS_TENSORCOREWALK_H

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::pisa {

/// A level's candidates, one per lane (the two-stage walk has run on the
/// H200 with up to 32: K = 16, case n4096_bf16_k16).
constexpr int64_t kMaxLaneCandidates = 32;

/// Why a walk of these sizes cannot score its levels on tensor cores, or
/// nullopt when it can: bf16 queries (exact as mma operands), G = 16 (one
/// m16 tile), d a multiple of 16, fanout 2, and g K candidates a multiple
/// of 4 (whole n8 tiles of child columns) and at most one per lane.
inline std::optional<std::string>
tensorCoreWalkLimit(bool bf16Queries, int64_t groupSize, int64_t headDim,
                    int64_t fanout, int64_t candidates) {
  if (!bf16Queries)
    return std::string("bf16 queries");
  if (groupSize != 16)
    return "G = 16 query heads per KV head, not " + std::to_string(groupSize);
  if (headDim % 16 != 0)
    return "d a multiple of 16, not " + std::to_string(headDim);
  if (fanout != 2)
    return "branching g = 2, not " + std::to_string(fanout);
  if (candidates % 4 != 0 || candidates > kMaxLaneCandidates)
    return "g * K a multiple of 4 and at most " +
           std::to_string(kMaxLaneCandidates) + ", not " +
           std::to_string(candidates);
  return std::nullopt;
}

} // namespace mlir::pisa

#endif // PISA_ANALYSIS_TENSORCOREWALK_H
