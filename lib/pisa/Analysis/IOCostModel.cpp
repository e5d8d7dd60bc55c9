//===- IOCostModel.cpp - Two-stage vs single-stage IO model ---------------===//
//
// The decision compares integers (G*Q + C < C*Q) so that the paper's
// boundary case G + C/Q == C is decided exactly, not by rounding.
//
//===----------------------------------------------------------------------===//

#include "pisa/Analysis/IOCostModel.h"
#include "pisa/Analysis/PyramidLayout.h"

#include <algorithm>
#include <sstream>

using namespace mlir::pisa;

std::optional<std::string>
mlir::pisa::validateIOCostInputs(const IOCostInputs &in) {
  auto bad = [](const char *name, int64_t v) {
    return "expected " + std::string(name) + " >= 1 but got " +
           std::to_string(v);
  };
  if (in.groupSize < 1)
    return bad("group size G", in.groupSize);
  if (in.blockSize < 1)
    return bad("block size C", in.blockSize);
  if (in.qTile < 1)
    return bad("q-tile", in.qTile);
  if (in.headDim < 1)
    return bad("head dim d", in.headDim);
  if (in.queryBytes < 1 || in.keyBytes < 1)
    return bad("element size", std::min(in.queryBytes, in.keyBytes));
  if (in.numQueries && *in.numQueries < 1)
    return bad("queries", *in.numQueries);
  return std::nullopt;
}

IOCostEstimate mlir::pisa::estimateScheduleIO(const IOCostInputs &in,
                                              SchedulePolicy policy) {
  const int64_t g = in.groupSize, c = in.blockSize, d = in.headDim;
  IOCostEstimate est;
  // Products in double: every input may be up to 2^63 - 1.
  const double gd = double(g) * double(d), cd = double(c) * double(d);
  est.twoStageElems = gd + cd / double(in.qTile);
  est.singleStageElems = cd;
  est.twoStageBytes =
      gd * double(in.queryBytes) + cd * double(in.keyBytes) / double(in.qTile);
  est.singleStageBytes = cd * double(in.keyBytes);
  est.effectiveQTile =
      in.numQueries ? std::min(in.qTile, *in.numQueries) : in.qTile;
  est.refinedTwoStageElems = gd + cd / double(est.effectiveQTile);

  std::ostringstream why;
  if (in.numQueries && *in.numQueries == 1) {
    est.twoStage = false;
    why << "one query per sequence (decode): no key tile is shared, "
           "single-stage";
    est.reason = why.str();
    return est;
  }
  int64_t q = policy == SchedulePolicy::Refined ? est.effectiveQTile : in.qTile;
  // Exact in 128 bits: G*Q + C < C*Q cannot overflow for 63-bit inputs.
  est.twoStage = __int128(g) * q + c < __int128(c) * q;
  why << "G + C/Q_tile = " << g << " + " << c << "/" << q << " = "
      << double(g) + double(c) / double(q) << (est.twoStage ? " < " : " >= ")
      << "C = " << c << ": " << (est.twoStage ? "two-stage" : "single-stage");
  if (policy == SchedulePolicy::Refined && q != in.qTile)
    why << " (Q_tile " << in.qTile << " capped at " << q << " queries)";
  est.reason = why.str();
  return est;
}

SelectionWork mlir::pisa::estimateSelectionWork(int64_t numKeys,
                                                int64_t blockSize,
                                                int64_t branching,
                                                int64_t topK) {
  PyramidLayout layout(numKeys, blockSize, branching);
  // Products in double: numKeys may be up to 2^63 - 1, and the callers'
  // ranges bound branching and topK.
  const double candidates = double(branching) * double(topK);
  SelectionWork work;
  for (int64_t level = layout.numLevels(); level >= 2; --level)
    work.walkRows += std::min(double(branching) * candidates,
                              double(layout.size(level - 1)));
  const double leaves = std::min(candidates, double(layout.numLeaves()));
  work.leafRows = leaves * double(blockSize);
  work.pisaRows = work.walkRows + work.leafRows;
  work.flatRows = double(layout.numLeaves());
  work.flatCheaper = work.flatRows < work.pisaRows;
  std::ostringstream why;
  why << "per query, flat block selection scores N/C = " << work.flatRows
      << " block summaries and PISA at most " << work.pisaRows << " rows ("
      << work.walkRows << " summaries on the walk + " << leaves << " leaves x "
      << blockSize << " keys)";
  if (work.flatCheaper)
    why << ": flat selection does " << work.pisaRows / work.flatRows
        << "x less work at this length; PISA's selection is kept (it is "
           "what the op computes)";
  work.reason = why.str();
  return work;
}
