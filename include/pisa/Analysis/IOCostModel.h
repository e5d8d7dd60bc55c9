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

/// Rows of d scored per query (each for all G heads) by PISA's selection and
/// by flat block selection, which scores every leaf block's summary for
/// every query. Upper bounds: the walk scores at most the g children of its
/// g*K candidates per level, stage 2 at most g*K leaves of C raw keys.
struct SelectionWork {
  double walkRows = 0; ///< Summaries on the walk, levels L..2.
  double leafRows = 0; ///< g*K leaves x C keys.
  double pisaRows = 0; ///< walkRows + leafRows.
  double flatRows = 0; ///< ceil(N / C) block summaries.
  /// Flat selection would score fewer rows (short sequences). PISA's
  /// selection is still what the ops compute: the two select differently.
  bool flatCheaper = false;
  std::string reason;
};

/// Requires numKeys, blockSize, topK >= 1 and branching >= 2.
SelectionWork estimateSelectionWork(int64_t numKeys, int64_t blockSize,
                                    int64_t branching, int64_t topK);

} // namespace mlir::pisa

#endif // PISA_ANALYSIS_IOCOSTMODEL_H
