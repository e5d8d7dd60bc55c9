//===- IOCostModel.h - Two-stage vs single-stage IO model ------*- C++ -*-===//
//
// The IO-cost crossover rule of PISA (docs/schedule.md): per (query,
// candidate leaf) pair the two-stage kernel loads G*d query values plus
// C*d/Q_tile key values, the single-stage kernel C*d key values. Plain C++
// so that the pass, the tools and the unit tests share one formula.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_ANALYSIS_IOCOSTMODEL_H
#define PISA_ANALYSIS_IOCOSTMODEL_H

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::pisa {

/// Which rule decides.
enum class SchedulePolicy {
  /// The paper's rule: two-stage iff G + C/Q_tile < C, single-stage for one
  /// query per sequence.
  Paper,
  /// The paper's rule with Q_tile capped at the number of queries, which is
  /// all the key reuse a tile can really get.
  Refined,
};

struct IOCostInputs {
  int64_t groupSize = 16; ///< G: query heads per KV head.
  int64_t blockSize = 64; ///< C: keys per leaf block.
  int64_t qTile = 4;      ///< Queries sharing one loaded key tile.
  int64_t headDim = 128;  ///< d.
  int64_t queryBytes = 2; ///< Bytes per query element.
  int64_t keyBytes = 2;   ///< Bytes per key element.
  /// Queries per sequence; std::nullopt when unknown (dynamic), which is
  /// taken as prefill: at least Q_tile queries.
  std::optional<int64_t> numQueries;
};

struct IOCostEstimate {
  /// Paper figures, elements per (query, candidate leaf) pair.
  double twoStageElems = 0, singleStageElems = 0;
  double twoStageBytes = 0, singleStageBytes = 0;
  /// min(Q_tile, queries): the reuse a key tile can actually get.
  int64_t effectiveQTile = 0;
  /// Two-stage figure with the effective Q_tile.
  double refinedTwoStageElems = 0;
  /// The choice under the requested policy, and why, in one line.
  bool twoStage = false;
  std::string reason;
};

/// Returns an error message when an input is out of range, else nullopt.
std::optional<std::string> validateIOCostInputs(const IOCostInputs &in);

/// Applies `policy` to valid inputs (see validateIOCostInputs).
IOCostEstimate estimateScheduleIO(const IOCostInputs &in,
                                  SchedulePolicy policy);

} // namespace mlir::pisa

#endif // PISA_ANALYSIS_IOCOSTMODEL_H
