//===- Plan.cpp - pisa-run plan: the schedule decision as JSON ------------===//

#include "Options.h"

#include "pisa/Analysis/IOCostModel.h"
#include "pisa/Analysis/PyramidLayout.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace pisatool;
using namespace mlir::pisa;

int pisatool::runPlan(const Options &options) {
  IOCostInputs in;
  auto g = options.integer("group-size", std::nullopt);
  if (!g)
    return fail(g.takeError());
  auto c = options.integer("block-size", std::nullopt);
  if (!c)
    return fail(c.takeError());
  auto t = options.integer("q-tile", std::nullopt);
  if (!t)
    return fail(t.takeError());
  auto n = options.integer("queries", std::nullopt);
  if (!n)
    return fail(n.takeError());
  auto d = options.integer("head-dim", 128);
  if (!d)
    return fail(d.takeError());
  in.groupSize = *g;
  in.blockSize = *c;
  in.qTile = *t;
  in.numQueries = *n;
  in.headDim = *d;

  std::string dtype = options.has("dtype") ? *options.str("dtype") : "bf16";
  if (dtype == "f32")
    in.queryBytes = in.keyBytes = 4;
  else if (dtype == "f16" || dtype == "bf16")
    in.queryBytes = in.keyBytes = 2;
  else
    return fail("expected --dtype bf16, f16 or f32 but got '" + dtype + "'");

  std::string policyName =
      options.has("policy") ? *options.str("policy") : "paper";
  SchedulePolicy policy;
  if (policyName == "paper")
    policy = SchedulePolicy::Paper;
  else if (policyName == "refined")
    policy = SchedulePolicy::Refined;
  else
    return fail("expected --policy paper or refined but got '" + policyName +
                "'");

  if (std::optional<std::string> error = validateIOCostInputs(in))
    return fail(*error);
  IOCostEstimate est = estimateScheduleIO(in, policy);
  llvm::json::Object out{
      {"schedule", est.twoStage ? "two_stage" : "single_stage"},
      {"io_two_stage", est.twoStageElems},
      {"io_single_stage", est.singleStageElems},
      {"io_unit", "elements per (query, candidate leaf) pair"},
      {"bytes_two_stage", est.twoStageBytes},
      {"bytes_single_stage", est.singleStageBytes},
      {"effective_q_tile", est.effectiveQTile},
      {"refined_io_two_stage", est.refinedTwoStageElems},
      {"policy", policyName},
      {"reason", est.reason},
  };
  if (options.has("keys")) {
    auto keys = options.integer("keys", std::nullopt);
    if (!keys)
      return fail(keys.takeError());
    auto topK = options.integer("topk", 8);
    if (!topK)
      return fail(topK.takeError());
    auto branching = options.integer("branching", 2);
    if (!branching)
      return fail(branching.takeError());
    if (*keys < 1)
      return fail("expected --keys >= 1 but got " + std::to_string(*keys));
    if (*topK < 1 || *topK > mlir::pisa::kMaxTopK)
      return fail("expected --topk in [1, " +
                  std::to_string(mlir::pisa::kMaxTopK) + "] but got " +
                  std::to_string(*topK));
    if (*branching < 2 || *branching > mlir::pisa::kMaxBranching)
      return fail("expected --branching in [2, " +
                  std::to_string(mlir::pisa::kMaxBranching) + "] but got " +
                  std::to_string(*branching));
    SelectionWork work =
        estimateSelectionWork(*keys, in.blockSize, *branching, *topK);
    out["selection_work"] = llvm::json::Object{
        {"unit", "rows of d scored per query, for all G heads (upper bounds)"},
        {"walk_rows", work.walkRows},
        {"leaf_rows", work.leafRows},
        {"pisa_rows", work.pisaRows},
        {"flat_rows", work.flatRows},
        {"flat_cheaper", work.flatCheaper},
        {"reason", work.reason},
    };
  }
  llvm::outs() << llvm::json::Value(std::move(out)) << "\n";
  return 0;
}
