//===- LseScoreToGPU.cpp - the lse_score kernel ---------------------------===//
//
// pisa.kernel.lse_score: one warp per (query, batch x KV head), four per
// block, scores each entry of its query's candidate row with the warp
// scorer the selection kernels use (the query's G head rows in registers
// when they fit, docs/gpu.md), so a node scores alike here and inside
// hier_topk. Lane 0 writes the scores.
//
//===----------------------------------------------------------------------===//

#include "Selection/QueryKernels.h"

#include "../Common/LoopBuilders.h"

#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

namespace {

/// Child rows a warp loads before folding any: their latencies overlap
/// (the single-stage kernel's leaf scorer keeps 8 in flight too).
constexpr int64_t kRowsInFlight = 8;

struct LseScoreToGPU : KernelOpPattern<LseScoreKernelOp> {
  using KernelOpPattern::KernelOpPattern;
  void lower(LseScoreKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    const ScoredLevel level =
        scoredLevel(op.getLevel(), op.getBlockSize(), op.getBranching());
    Problem p =
        problemOf(op.getQueries(), op.getChildren(), /*topK=*/1, level.fanout,
                  op.getBlockSize(), op.getScale().convertToFloat(), Value());
    Kernel kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      kernel = createKernel(rewriter, op, "lse_score",
                            {{"queries", p.queries},
                             {"children", bufferType(op.getChildren())},
                             {"candidates", bufferType(op.getCandidates())},
                             {"offset", rewriter.getIndexType()},
                             {"scores", bufferType(op.getScores())}});
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      buildBody(b, kernel, p, level);
    }
    launch(host, kernel,
           host.createOrFold<arith::CeilDivUIOp>(
               dimOf(host, op.getQueries(), 2), indexConst(host, kWarpQueries)),
           groupsOf(host, op.getScores(), p.kvHeads), kQueryThreads,
           {{"queries", op.getQueries()},
            {"children", op.getChildren()},
            {"candidates", op.getCandidates()},
            {"offset", op.getQueryOffset()},
            {"scores", op.getScores()}});
  }

  /// The warp of query i of (batch, KV head): for each candidate slot s,
  /// the node's group score, or -inf for a negative entry.
  static void buildBody(ImplicitLocOpBuilder &b, const Kernel &kernel,
                        const Problem &p, const ScoredLevel &level) {
    Value queries = kernel.arg("queries"), children = kernel.arg("children");
    Value candidates = kernel.arg("candidates"), scores = kernel.arg("scores");
    SmallVector<Value> at = queryWarp(b, p, dimOf(b, queries, 2));
    guarded(b, at[3], [&](ImplicitLocOpBuilder &gb) {
      Value batch = at[0], kvHead = at[1], query = at[2], lane = at[4];
      QuerySite site{batch, kvHead, query,
                     arith::AddIOp::create(gb, kernel.arg("offset"), query)};
      std::optional<WarpQuery> rows =
          loadWarpQuery(gb, queries, site, p.groupSize, p.headDim, lane);
      WarpScorer score = warpScorer(rows, queries, children, p, lane, site);
      score.rowsInFlight = std::min(level.fanout, kRowsInFlight);
      ChildLevel childLevel{indexConst(gb, 0), dimOf(gb, children, 2),
                            indexConst(gb, level.fanout),
                            indexConst(gb, level.keysPerChild)};
      Value negInf = f32Const(gb, -std::numeric_limits<float>::infinity());
      Value writer = isLaneZero(gb, lane);
      buildLoop(gb, indexConst(gb, 0), dimOf(gb, candidates, 3), {},
                [&](ImplicitLocOpBuilder &lb, Value s, ValueRange) {
                  SmallVector<Value> slot{batch, kvHead, query, s};
                  Value raw = memref::LoadOp::create(lb, candidates, slot);
                  Value valid = cmp(lb, arith::CmpIPredicate::sge, raw,
                                    arith::ConstantIntOp::create(lb, 0, 32));
                  Value u = buildIf(
                      lb, valid, {lb.getF32Type()},
                      [&](ImplicitLocOpBuilder &tb) {
                        Value node = arith::IndexCastOp::create(
                            tb, tb.getIndexType(), raw);
                        return SmallVector<Value>{score(tb, childLevel, node)};
                      },
                      [&](ImplicitLocOpBuilder &) {
                        return SmallVector<Value>{negInf};
                      })[0];
                  buildIfThen(lb, writer, [&](ImplicitLocOpBuilder &wb) {
                    memref::StoreOp::create(wb, u, scores, slot);
                  });
                  return SmallVector<Value>{};
                });
    });
  }
};

} // namespace

void mlir::pisa::detail::addLseScorePatterns(RewritePatternSet &patterns) {
  patterns.add<LseScoreToGPU>(patterns.getContext());
}
