//===- SelectionConfigs.cpp - The selection kernels' kernel_config -------===//
//
// Stage-2 tile scoring and the single-stage selection kernels: which
// variant, threads, warps per query, candidate walk and level scorer
// (docs/gpu.md, "Kernel configurations").
//
//===----------------------------------------------------------------------===//

#include "KernelConfigs.h"
#include "Selection/LaneWalk.h"
#include "Selection/LeafScoreMMA.h"
#include "Selection/QueryKernels.h"
#include "Selection/TileScoring.h"
#include "Selection/WarpWalkMMA.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

/// Stage-2 scoring: wgmma where sm_90a and the shape allow, else mma.sync
/// (32 rows per warp and the register epilogue where they apply), else
/// SIMT, a thread per row.
FailureOr<KernelConfigAttr> mlir::pisa::detail::configure(ScoreTilesKernelOp op,
                                                          Configurer &c) {
  TileProblem p{};
  Heads q = headsOf(op, op.getQueries());
  p.kvHeads = headsOf(op, op.getKeys()).heads;
  p.groupSize = q.heads / p.kvHeads;
  p.headDim = q.dim;
  p.topK = op.getTopk();
  p.qTile = op.getQTile();
  p.blockSize = op.getBlockSize();
  p.queries = memrefOf(op.getQueries());
  p.keys = memrefOf(op.getKeys());
  MmaScoreShape shape = defaultMmaScoreShape(p);
  shape.rowsPerWarp =
      c.field(&KernelConfigAttr::getRowsPerWarp).value_or(shape.rowsPerWarp);
  if (auto e = c.field(&KernelConfigAttr::getEpilogue))
    shape.registerEpilogue = *e == KernelEpilogue::Registers;
  auto wgmmaUnsupported = [&]() -> std::optional<std::string> {
    if (!c.features.warpgroupMma)
      return "wgmma needs sm_90a";
    return wgmmaScoreUnsupported(p);
  };
  KernelVariant chosen = !wgmmaUnsupported() ? KernelVariant::Wgmma
                         : !mmaScoreUnsupported(p, defaultMmaScoreShape(p))
                             ? KernelVariant::MmaSync
                             : KernelVariant::Simt;
  FailureOr<KernelVariant> variant = c.pick<KernelVariant>(
      "variant", c.askedVariant(), chosen,
      [&](KernelVariant v) -> std::optional<std::string> {
        if (v == KernelVariant::Wgmma)
          return wgmmaUnsupported();
        if (v == KernelVariant::MmaSync)
          return mmaScoreUnsupported(p, defaultMmaScoreShape(p));
        return std::nullopt;
      });
  if (failed(variant))
    return failure();
  FailureOr<int64_t> tiles = c.pick<int64_t>(
      "tiles_per_block", c.field(&KernelConfigAttr::getTilesPerBlock),
      *variant == KernelVariant::Simt ? 1 : kScoreTilesPerBlock,
      [&](int64_t t) -> std::optional<std::string> {
        if (*variant == KernelVariant::Simt && t != 1)
          return "the SIMT scorer takes one tile per block";
        return std::nullopt;
      });
  if (failed(tiles))
    return failure();
  if (*variant == KernelVariant::MmaSync)
    if (std::optional<std::string> why = mmaScoreUnsupported(p, shape)) {
      // Named by the field asked (only asked fields leave the defaults).
      StringRef epilogue = shape.registerEpilogue ? "registers" : "shared";
      InFlightDiagnostic diag = op->emitOpError() << kKernelConfigAttrName;
      if (!c.field(&KernelConfigAttr::getRowsPerWarp))
        diag << " epilogue = " << epilogue << " with " << shape.rowsPerWarp
             << " rows per warp";
      else
        diag << " rows_per_warp = " << shape.rowsPerWarp << " with the "
             << epilogue << " epilogue";
      diag << " is not supported here: " << *why;
      return failure();
    }
  MLIRContext *ctx = op->getContext();
  switch (*variant) {
  case KernelVariant::Wgmma:
    return KernelConfigAttr::get(
        ctx, *variant, wgmmaScoreThreads(), std::nullopt, std::nullopt,
        std::nullopt, std::nullopt, *tiles, std::nullopt,
        c.blocksPerSM(wgmmaScoreBlocksPerSM(p)), std::nullopt, std::nullopt);
  case KernelVariant::MmaSync:
    return KernelConfigAttr::get(
        ctx, *variant, mmaScoreThreads(p, shape), std::nullopt, std::nullopt,
        std::nullopt, shape.rowsPerWarp, *tiles,
        shape.registerEpilogue ? KernelEpilogue::Registers
                               : KernelEpilogue::Shared,
        c.blocksPerSM(mmaScoreBlocksPerSM(p, shape)), std::nullopt,
        std::nullopt);
  case KernelVariant::Simt:
    break;
  }
  return KernelConfigAttr::get(ctx, *variant, simtScoreThreads(p), std::nullopt,
                               std::nullopt, std::nullopt, std::nullopt, *tiles,
                               std::nullopt, c.blocksPerSM(0), std::nullopt,
                               std::nullopt);
}

namespace {

/// What the single-stage kernels' choices depend on.
struct SingleStageShape {
  Type elem;
  int64_t groupSize, headDim, topK, fanout, blockSize;
  std::optional<int64_t> staticQueries; ///< Nq when static
};

/// Warps per query: `fixed` for an op whose kernel has one, else 16 (a
/// decode block) for at most 4 static queries, else 1.
FailureOr<int64_t> pickWarpsPerQuery(Configurer &c, const SingleStageShape &s,
                                     std::optional<int64_t> fixed) {
  const int64_t chosen =
      fixed ? *fixed
            : (s.staticQueries && *s.staticQueries <= kMaxDecodeQueries
                   ? kDecodeWarps
                   : 1);
  return c.pick<int64_t>(
      "warps_per_query", c.field(&KernelConfigAttr::getWarpsPerQuery), chosen,
      [&](int64_t w) -> std::optional<std::string> {
        if (fixed && w != *fixed)
          return "this op's kernel gives a query " + text(*fixed) + " warp" +
                 (*fixed > 1 ? "s" : "");
        if (w != 1 && w != kDecodeWarps)
          return "a query takes 1 or " + text(kDecodeWarps) + " warps";
        return std::nullopt;
      });
}

/// A decode block's candidates: one per lane where g * K <= 32, else
/// ranked in shared memory; none for a warp per query.
FailureOr<std::optional<CandidateWalk>>
pickWalk(Configurer &c, const SingleStageShape &s, bool block) {
  const bool laneFits = fitsLaneWalk(s.fanout, s.topK);
  if (!block && !c.field(&KernelConfigAttr::getWalk))
    return std::optional<CandidateWalk>();
  FailureOr<CandidateWalk> w = c.pick<CandidateWalk>(
      "walk", c.field(&KernelConfigAttr::getWalk),
      laneFits ? CandidateWalk::Lanes : CandidateWalk::Ranks,
      [&](CandidateWalk w) -> std::optional<std::string> {
        if (!block)
          return "a warp per query walks with ranks of its own";
        if (w == CandidateWalk::Lanes && !laneFits)
          return "a candidate per lane needs g * K (" +
                 text(s.fanout * s.topK) + ") <= 32";
        return std::nullopt;
      });
  if (failed(w))
    return failure();
  return std::optional<CandidateWalk>(*w);
}

/// The leaves' scorer: mma.sync where the lane walk runs and the shape
/// allows, else SIMT.
FailureOr<KernelVariant>
pickLeafVariant(Configurer &c, const SingleStageShape &s, bool lanes) {
  const bool leavesMma =
      canScoreLeavesWithMma(s.elem, s.groupSize, s.headDim, s.blockSize);
  return c.pick<KernelVariant>(
      "variant", c.askedVariant(),
      lanes && leavesMma ? KernelVariant::MmaSync : KernelVariant::Simt,
      [&](KernelVariant v) -> std::optional<std::string> {
        if (v == KernelVariant::Wgmma)
          return "the leaves are scored with simt or mma_sync";
        if (v == KernelVariant::MmaSync && !lanes)
          return "only the walk with a candidate per lane scores its leaves "
                 "on tensor cores";
        if (v == KernelVariant::MmaSync && !leavesMma)
          return "tensor-core leaves need f16 or bf16, G <= 16, d a "
                 "multiple of 32 and C of 8";
        return std::nullopt;
      });
}

/// The lane walk's level scorer: mma.sync with tensor-core leaves, bf16
/// queries and fanout 2, else SIMT; none without the lane walk.
FailureOr<std::optional<KernelVariant>>
pickLevelVariant(Configurer &c, const SingleStageShape &s, bool lanes,
                 KernelVariant leaves) {
  if (!lanes && !c.field(&KernelConfigAttr::getLevelVariant))
    return std::optional<KernelVariant>();
  const bool levelsMma = canScoreLevelsWithMma(s.elem, s.groupSize, s.headDim,
                                               s.blockSize, s.fanout);
  const bool mma = levelsMma && leaves == KernelVariant::MmaSync;
  FailureOr<KernelVariant> v = c.pick<KernelVariant>(
      "level_variant", c.field(&KernelConfigAttr::getLevelVariant),
      mma ? KernelVariant::MmaSync : KernelVariant::Simt,
      [&](KernelVariant v) -> std::optional<std::string> {
        if (!lanes)
          return "only the walk with a candidate per lane scores levels "
                 "apart";
        if (v == KernelVariant::MmaSync && !mma)
          return "tensor-core levels need tensor-core leaves (variant "
                 "mma_sync), bf16 queries and fanout 2";
        return std::nullopt;
      });
  if (failed(v))
    return failure();
  return std::optional<KernelVariant>(*v);
}

} // namespace

/// The single-stage selection (select_single_stage, its fused append form,
/// select_decode, the varlen form): a block of 16 warps per query for at
/// most 4 queries (decode), which walks with a candidate per lane where g *
/// K <= 32 and then scores leaves and levels on tensor cores where they
/// allow; else a warp per query, four per block.
FailureOr<KernelConfigAttr> mlir::pisa::detail::configureSingleStage(
    Operation *op, Value queries, int64_t topK, int64_t fanout,
    int64_t blockSize, std::optional<int64_t> warps, Configurer &c) {
  Heads q = headsOf(op, queries);
  SingleStageShape s{cast<ShapedType>(queries.getType()).getElementType(),
                     q.heads / headsOf(op, op->getOperand(1)).heads,
                     q.dim,
                     topK,
                     fanout,
                     blockSize,
                     ShapedType::isDynamic(q.tokens)
                         ? std::nullopt
                         : std::optional<int64_t>(q.tokens)};
  FailureOr<int64_t> warpsPerQuery = pickWarpsPerQuery(c, s, warps);
  if (failed(warpsPerQuery))
    return failure();
  const bool block = *warpsPerQuery > 1;
  FailureOr<std::optional<CandidateWalk>> walk = pickWalk(c, s, block);
  if (failed(walk))
    return failure();
  const bool lanes = *walk == CandidateWalk::Lanes;
  FailureOr<KernelVariant> variant = pickLeafVariant(c, s, lanes);
  if (failed(variant))
    return failure();
  FailureOr<std::optional<KernelVariant>> levelVariant =
      pickLevelVariant(c, s, lanes, *variant);
  if (failed(levelVariant))
    return failure();
  // A block of several warps per query must launch whatever the walk's
  // registers need: one block per SM at least.
  return KernelConfigAttr::get(
      op->getContext(), *variant,
      block ? *warpsPerQuery * kLanes : kQueryThreads, *warpsPerQuery, *walk,
      *levelVariant, std::nullopt, std::nullopt, std::nullopt,
      c.blocksPerSM(block ? 1 : 0), std::nullopt, std::nullopt);
}
