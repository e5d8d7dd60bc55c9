//===- KernelConfigs.cpp - Each kernel-level op's #pisa.kernel_config ----===//
//
// The one place the GPU lowering's decisions are made: for each kernel-level
// op, which kernel variant, how many threads, the tile scorer's rows per
// warp and epilogue, the single-stage walk's warps per query, and the
// occupancy ptxas keeps registers for. --pisa-configure-kernels writes them
// as the op's kernel_config and --convert-pisa-to-gpu only reads them
// (docs/gpu.md, "Kernel configurations"). A field a configuration already
// sets is kept when the op's kernels support it: anyone can try another
// variant from the IR.
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionGrad.h"
#include "Attention/QueryTiles.h"
#include "Attention/SparseAttention.h"
#include "Attention/WarpQueryGrad.h"
#include "Pyramid/PyramidAppend.h"
#include "Selection/LaneWalk.h"
#include "Selection/LeafScoreMMA.h"
#include "Selection/QueryKernels.h"
#include "Selection/TileScoring.h"
#include "Selection/WarpWalkMMA.h"

#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

namespace {

std::string text(int64_t v) { return std::to_string(v); }
std::string text(KernelVariant v) { return stringifyKernelVariant(v).str(); }
std::string text(CandidateWalk v) { return stringifyCandidateWalk(v).str(); }
std::string text(KernelEpilogue v) { return stringifyKernelEpilogue(v).str(); }

/// The fields of a configuration being chosen; `asked` is the one the op
/// already carries (null when none).
class Configurer {
public:
  Configurer(Operation *op, KernelConfigAttr asked,
             const GPUTargetFeatures &features,
             const KernelPreferences &preferences)
      : op(op), asked(asked), features(features), preferences(preferences) {}

  Operation *op;
  KernelConfigAttr asked;
  GPUTargetFeatures features;
  KernelPreferences preferences;

  /// The value `asked` gives a free field, checked by `unsupported` (why
  /// the op's kernels cannot follow it, or nullopt), else `chosen`.
  template <typename T>
  FailureOr<T> pick(
      StringRef field, std::optional<T> askedValue, T chosen,
      llvm::function_ref<std::optional<std::string>(T)> unsupported = nullptr) {
    if (!askedValue)
      return chosen;
    if (unsupported)
      if (std::optional<std::string> why = unsupported(*askedValue)) {
        op->emitOpError() << kKernelConfigAttrName << " " << field << " = "
                          << text(*askedValue)
                          << " is not supported here: " << *why;
        return failure();
      }
    return *askedValue;
  }
  std::optional<KernelVariant> askedVariant() const {
    return asked ? std::optional(asked.getVariant()) : std::nullopt;
  }
  template <typename T>
  std::optional<T> field(std::optional<T> (KernelConfigAttr::*get)() const) {
    return asked ? (asked.*get)() : std::nullopt;
  }
  /// The occupancy hint: the asked one (any), else `chosen` (none when 0).
  std::optional<int64_t> blocksPerSM(int64_t chosen) {
    if (auto v = field(&KernelConfigAttr::getMinBlocksPerSM))
      return v;
    return chosen ? std::optional(chosen) : std::nullopt;
  }
  /// `config` with prefetch_ahead: the asked value where `unsupported`
  /// allows it, else `chosen`.
  FailureOr<KernelConfigAttr> withPrefetch(
      FailureOr<KernelConfigAttr> config, int64_t chosen,
      llvm::function_ref<std::optional<std::string>(int64_t)> unsupported) {
    if (failed(config))
      return failure();
    FailureOr<int64_t> ahead = pick<int64_t>(
        "prefetch_ahead", field(&KernelConfigAttr::getPrefetchAhead), chosen,
        unsupported);
    if (failed(ahead))
      return failure();
    // None chosen and none asked: the field stays absent.
    std::optional<int64_t> value = *ahead;
    if (*ahead == 0 && !field(&KernelConfigAttr::getPrefetchAhead))
      value = std::nullopt;
    KernelConfigAttr a = *config;
    return KernelConfigAttr::get(
        op->getContext(), a.getVariant(), a.getThreads(), a.getWarpsPerQuery(),
        a.getWalk(), a.getLevelVariant(), a.getRowsPerWarp(),
        a.getTilesPerBlock(), a.getEpilogue(), a.getMinBlocksPerSM(),
        a.getUnionQueries(), value);
  }
  KernelConfigAttr make(KernelVariant variant, int64_t threads,
                        std::optional<int64_t> minBlocksPerSM = std::nullopt) {
    return KernelConfigAttr::get(op->getContext(), variant, threads,
                                 std::nullopt, std::nullopt, std::nullopt,
                                 std::nullopt, std::nullopt, std::nullopt,
                                 minBlocksPerSM, std::nullopt, std::nullopt);
  }
};

/// Sizes of a [B, H, T, X] operand (token_major ops read queries, keys and
/// selection as [B, T, H, X]): {H, T, X}.
struct Heads {
  int64_t heads, tokens, dim;
};
Heads headsOf(Operation *op, Value v) {
  ArrayRef<int64_t> s = cast<ShapedType>(v.getType()).getShape();
  const bool tokenMajor = op->hasAttr("token_major");
  return {s[headDimIndex(tokenMajor)], s[tokenDimIndex(tokenMajor)], s[3]};
}

MemRefType memrefOf(Value v) {
  auto shaped = cast<ShapedType>(v.getType());
  return MemRefType::get(shaped.getShape(), shaped.getElementType());
}

/// Stage-2 scoring: wgmma where sm_90a and the shape allow, else mma.sync
/// (32 rows per warp and the register epilogue where they apply), else
/// SIMT, a thread per row.
FailureOr<KernelConfigAttr> configure(ScoreTilesKernelOp op, Configurer &c) {
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
      op->emitOpError() << kKernelConfigAttrName
                        << " rows_per_warp = " << shape.rowsPerWarp
                        << " with the "
                        << (shape.registerEpilogue ? "registers" : "shared")
                        << " epilogue is not supported here: " << *why;
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

/// The single-stage selection (select_single_stage, its fused append form,
/// select_decode, the varlen form): a block of 16 warps per query for at
/// most 4 queries (decode), which walks with a candidate per lane where g *
/// K <= 32 and then scores leaves and levels on tensor cores where they
/// allow; else a warp per query, four per block.
FailureOr<KernelConfigAttr> configureSingleStage(Operation *op, Value queries,
                                                 int64_t topK, int64_t fanout,
                                                 int64_t blockSize,
                                                 std::optional<int64_t> warps,
                                                 Configurer &c) {
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

/// An op with a register design and a staged one, on mma.sync: the
/// register design where `fits` (at most 2 blocks per SM: its 255
/// registers fit no more without spills; `needs` says what it takes), else
/// the staged one (blocks as shared memory allows); `bytes(inRegisters,
/// warpgroup)` is the chosen design's shared memory. Where the op offers
/// a wgmma design (`warpgroupWhy`: why it cannot take the op with the
/// chosen epilogue, or nullopt) that is the default; `variantWhy` refuses
/// any other variant. The staged designs split a block's keys between four
/// warps: they need C a multiple of 32 (`blockSize`).
FailureOr<KernelConfigAttr> registerOrStaged(
    Operation *op, Configurer &c, bool fits, StringRef needs, int64_t threads,
    StringRef variantWhy, int64_t blockSize,
    llvm::function_ref<int64_t(bool, bool)> bytes,
    llvm::function_ref<std::optional<std::string>(bool)> warpgroupWhy =
        nullptr) {
  FailureOr<KernelEpilogue> epilogue = c.pick<KernelEpilogue>(
      "epilogue", c.field(&KernelConfigAttr::getEpilogue),
      fits ? KernelEpilogue::Registers : KernelEpilogue::Shared,
      [&](KernelEpilogue e) -> std::optional<std::string> {
        if (e == KernelEpilogue::Registers && !fits)
          return needs.str();
        if (e != KernelEpilogue::Registers && blockSize % 32 != 0)
          return "the staged kernel needs C a multiple of 32 (four warps "
                 "split a block's keys)";
        return std::nullopt;
      });
  if (failed(epilogue))
    return failure();
  const bool inRegisters = *epilogue == KernelEpilogue::Registers;
  // wgmma where the op offers it (warpgroupWhy) and it takes the sizes.
  auto refuseWarpgroup = [&]() -> std::optional<std::string> {
    if (!warpgroupWhy)
      return variantWhy.str();
    return warpgroupWhy(inRegisters);
  };
  FailureOr<KernelVariant> variant = c.pick<KernelVariant>(
      "variant", c.askedVariant(),
      warpgroupWhy && !refuseWarpgroup() ? KernelVariant::Wgmma
                                         : KernelVariant::MmaSync,
      [&](KernelVariant v) -> std::optional<std::string> {
        if (v == KernelVariant::Wgmma)
          return refuseWarpgroup();
        if (v != KernelVariant::MmaSync)
          return variantWhy.str();
        return std::nullopt;
      });
  if (failed(variant))
    return failure();
  const bool warpgroup = *variant == KernelVariant::Wgmma;
  return KernelConfigAttr::get(
      op->getContext(), *variant, threads, std::nullopt, std::nullopt,
      std::nullopt, std::nullopt, std::nullopt, *epilogue,
      c.blocksPerSM(std::clamp<int64_t>(
          blocksBySharedMemory(bytes(inRegisters, warpgroup)), 1,
          inRegisters ? 2 : 16)),
      std::nullopt, std::nullopt);
}

/// The elements of an op's queries.
Type queryElements(Value queries) {
  return cast<ShapedType>(queries.getType()).getElementType();
}

/// Why query tiles of `queries` queries cannot take an op: more queries
/// than a tile takes, sizes the kernel does not take (`fits`, `needs`), or
/// tiles of `bytes` past a block's shared memory; nullopt where they can.
std::optional<std::string> queryTilesRefusal(int64_t queries, bool fits,
                                             StringRef needs, int64_t bytes) {
  if (queries > kMaxUnionQueries)
    return "a query tile takes at most " + std::to_string(kMaxUnionQueries) +
           " queries (a warp each and one that copies, up to 255 registers "
           "a lane: " +
           std::to_string(kMaxUnionQueries + 1) +
           " warps fill an SM's 65,536 registers)";
  if (!fits)
    return needs.str();
  if (bytes > kMaxAttentionSharedBytes)
    return "its tiles take " + std::to_string(bytes) +
           " bytes of shared memory, more than a block's " +
           std::to_string(kMaxAttentionSharedBytes);
  return std::nullopt;
}

/// The error for an asked union_queries the op's kernel cannot follow.
FailureOr<KernelConfigAttr> refuseUnionQueries(Operation *op, int64_t queries,
                                               StringRef why) {
  op->emitOpError() << kKernelConfigAttrName << " union_queries = " << queries
                    << " is not supported here: " << why;
  return failure();
}

/// A query tile's occupancy hint: at most eight warps an SM (a lane keeps
/// up to 255 registers), as many as shared memory holds: two tiles of
/// three queries and their copying warps, one of four to seven.
int64_t queryTileBlocksPerSM(int64_t queries, int64_t bytes) {
  return std::clamp<int64_t>(blocksBySharedMemory(bytes), 1,
                             std::max<int64_t>(1, 8 / (queries + 1)));
}

/// Sparse attention on query tiles of `queries` consecutive queries (the
/// kernel of QueryTileAttention.cpp): mma.sync, registers (the rows finish
/// there), a warp per query.
FailureOr<KernelConfigAttr> queryTileAttention(SparseAttentionKernelOp op,
                                               Configurer &c, int64_t queries,
                                               bool fits, int64_t bytes) {
  if (std::optional<std::string> why =
          queryTilesRefusal(queries, fits, kQueryTileAttentionNeeds, bytes))
    return refuseUnionQueries(op, queries, *why);
  FailureOr<KernelEpilogue> epilogue = c.pick<KernelEpilogue>(
      "epilogue", c.field(&KernelConfigAttr::getEpilogue),
      KernelEpilogue::Registers,
      [&](KernelEpilogue e) -> std::optional<std::string> {
        if (e != KernelEpilogue::Registers)
          return "the query-tile kernel finishes its rows in registers";
        return std::nullopt;
      });
  FailureOr<KernelVariant> variant =
      c.pick<KernelVariant>("variant", c.askedVariant(), KernelVariant::MmaSync,
                            [&](KernelVariant v) -> std::optional<std::string> {
                              if (v != KernelVariant::MmaSync)
                                return "sparse attention runs on mma_sync";
                              return std::nullopt;
                            });
  if (failed(epilogue) || failed(variant))
    return failure();
  // A warp per query and one that copies the union's entries.
  return KernelConfigAttr::get(
      op->getContext(), *variant, (queries + 1) * kLanes, std::nullopt,
      std::nullopt, std::nullopt, std::nullopt, std::nullopt, *epilogue,
      c.blocksPerSM(queryTileBlocksPerSM(queries, bytes)), queries,
      std::nullopt);
}

/// Sparse attention: the register kernel where the query's heads and
/// tiles fit a lane's registers (attendsInRegisters), else the staged one;
/// the query-tile kernel where union_queries asks for it.
FailureOr<KernelConfigAttr> configure(SparseAttentionKernelOp op,
                                      Configurer &c) {
  Heads q = headsOf(op, op.getQueries());
  const int64_t G = q.heads / headsOf(op, op.getKeys()).heads;
  const int64_t dv = headsOf(op, op.getValues()).dim;
  const int64_t topK = headsOf(op, op.getSelection()).dim;
  const int64_t C = op.getBlockSize();
  Type elem = queryElements(op.getQueries());
  const bool tilesFit = attendsOnQueryTiles(elem, G, q.dim, dv, C);
  auto tileBytes = [&](int64_t queries) {
    return QueryTileAttentionPlan(queries, q.dim, dv, C, topK).bytes;
  };
  if (auto queries = c.field(&KernelConfigAttr::getUnionQueries))
    return queryTileAttention(op, c, *queries, tilesFit, tileBytes(*queries));
  // Preferred where the query-tile kernel takes the sizes and no other
  // asked field rules it out.
  const int64_t preferred = c.preferences.attentionUnionQueries;
  std::optional<KernelEpilogue> askedEpilogue =
      c.field(&KernelConfigAttr::getEpilogue);
  if (preferred > 0 &&
      !queryTilesRefusal(preferred, tilesFit, kQueryTileAttentionNeeds,
                         tileBytes(preferred)) &&
      (!askedEpilogue || *askedEpilogue == KernelEpilogue::Registers))
    return queryTileAttention(op, c, preferred, tilesFit, tileBytes(preferred));
  return registerOrStaged(
      op, c, attendsInRegisters(elem, G, q.dim, dv, C),
      "the register kernel needs G <= 16, d a multiple of 32 up to 128, dv "
      "of 8 up to 128, C of 16 up to 64 and 16-bit inputs",
      kAttentionThreads, "sparse attention runs on mma_sync", C,
      [&](bool inRegisters, bool) {
        return inRegisters ? RegisterAttentionPlan(q.dim, dv, C, topK).bytes
                           : AttentionTiles(G, q.dim, dv, C, topK).bytes;
      });
}

/// How a kernel of one design takes an occupancy hint.
enum class Hint { None, Free };

/// A kernel of one design: `variant` and `threads` are facts of it; the
/// occupancy hint may be chosen where its lowering applies one (`hint`),
/// `blocksPerSM` by default (0: none). Elsewhere min_blocks_per_sm does not
/// apply (confirmFields says so).
FailureOr<KernelConfigAttr> fixedDesign(Configurer &c, KernelVariant variant,
                                        int64_t threads, Hint hint = Hint::None,
                                        int64_t blocksPerSM = 0) {
  FailureOr<KernelVariant> v = c.pick<KernelVariant>(
      "variant", c.askedVariant(), variant,
      [&](KernelVariant asked) -> std::optional<std::string> {
        if (asked != variant)
          return "this op's kernel runs on " + text(variant);
        return std::nullopt;
      });
  if (failed(v))
    return failure();
  return c.make(variant, threads,
                hint == Hint::Free ? c.blocksPerSM(blocksPerSM) : std::nullopt);
}

/// The backward's query kernel on query tiles of `queries` queries
/// (QueryGradTiles.cpp): a warp a query and one that copies the union's
/// entries, dQ in registers.
FailureOr<KernelConfigAttr>
gradQueryTiles(SparseAttentionGradQueriesKernelOp op, Configurer &c,
               int64_t queries, bool fits, int64_t bytes) {
  FailureOr<KernelConfigAttr> config =
      registerOrStaged(op, c, fits, kQueryTileGradNeeds, kGradThreads,
                       "this op's kernel runs on mma_sync", op.getBlockSize(),
                       [&](bool, bool) { return bytes; });
  if (failed(config))
    return failure();
  return KernelConfigAttr::get(
      op->getContext(), config->getVariant(), (queries + 1) * kLanes,
      std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
      config->getEpilogue(),
      c.blocksPerSM(queryTileBlocksPerSM(queries, bytes)), queries,
      std::nullopt);
}

/// The backward's query kernel: the register kernel (a warp a query, dQ in
/// registers, QueryGradInRegisters.cpp) where it takes the sizes
/// (queryGradInRegisters), else query tiles of kGradTileQueries where they
/// do (queryTileGradFits), else staged (a query a block). Query tiles of W
/// where union_queries asks for them, or the pipeline prefers them.
FailureOr<KernelConfigAttr> configure(SparseAttentionGradQueriesKernelOp op,
                                      Configurer &c) {
  Heads q = headsOf(op, op.getQueries());
  const int64_t G = q.heads / headsOf(op, op.getKeys()).heads;
  const int64_t d = q.dim, dv = headsOf(op, op.getValues()).dim;
  const int64_t C = op.getBlockSize();
  const int64_t topK = headsOf(op, op.getSelection()).dim;
  Type elem = queryElements(op.getQueries());
  const bool tilesFit = queryTileGradFits(elem, G, d, dv, C);
  const bool registersFit = queryGradInRegisters(elem, G, d, dv, C);
  auto tileBytes = [&](int64_t queries) {
    return QueryTileGradPlan(queries, d, dv, C, topK).bytes;
  };
  std::optional<KernelEpilogue> askedEpilogue =
      c.field(&KernelConfigAttr::getEpilogue);
  const bool registersAsked =
      !askedEpilogue || *askedEpilogue == KernelEpilogue::Registers;
  if (std::optional<int64_t> queries =
          c.field(&KernelConfigAttr::getUnionQueries)) {
    std::optional<std::string> why = queryTilesRefusal(
        *queries, tilesFit, kQueryTileGradNeeds, tileBytes(*queries));
    if (!why && !registersAsked)
      why = "the query-tile kernel finishes dq in registers, not through "
            "shared memory";
    if (why)
      return refuseUnionQueries(op, *queries, *why);
    return gradQueryTiles(op, c, *queries, tilesFit, tileBytes(*queries));
  }
  const int64_t preferred = c.preferences.attentionUnionQueries;
  if (preferred > 0 && registersAsked &&
      !queryTilesRefusal(preferred, tilesFit, kQueryTileGradNeeds,
                         tileBytes(preferred)))
    return gradQueryTiles(op, c, preferred, tilesFit, tileBytes(preferred));
  if (!registersFit && tilesFit && registersAsked)
    return gradQueryTiles(op, c, kGradTileQueries, tilesFit,
                          tileBytes(kGradTileQueries));
  return registerOrStaged(
      op, c, registersFit, kRegisterQueryGradNeeds, kGradThreads,
      "this op's kernel runs on mma_sync", C, [&](bool inRegisters, bool) {
        return inRegisters ? RegisterQueryGradPlan(d, dv, C, topK).bytes
                           : QueryGradPlan(G, d, dv, C, topK).bytes;
      });
}

/// The backward's key kernel: dK and dV in registers where they fit a
/// lane's (keyGradientsInRegisters), else staged.
FailureOr<KernelConfigAttr> configure(SparseAttentionGradKeysKernelOp op,
                                      Configurer &c) {
  Heads q = headsOf(op, op.getQueries());
  const int64_t G = q.heads / headsOf(op, op.getKeys()).heads;
  const int64_t d = q.dim, dv = headsOf(op, op.getValues()).dim;
  const int64_t C = op.getBlockSize();
  Type elem = queryElements(op.getQueries());
  FailureOr<KernelConfigAttr> config = registerOrStaged(
      op, c, keyGradientsInRegisters(elem, d, dv, C),
      "the register key kernel needs C of 16, 32 or 64, d and dv multiples "
      "of 16 with d + dv <= 256 and 16-bit inputs",
      kGradThreads, "this op's kernel runs on mma_sync or wgmma", C,
      [&](bool inRegisters, bool warpgroup) {
        return KeyGradPlan(G, d, dv, C, inRegisters, warpgroup).bytes;
      },
      [&](bool inRegisters) -> std::optional<std::string> {
        if (!inRegisters)
          return std::string("the staged key kernel runs on mma_sync");
        if (!c.features.warpgroupMma ||
            !keyGradientsOnWarpgroup(elem, d, dv, C))
          return kKeyGradWarpgroupNeeds.str();
        return std::nullopt;
      });
  // The dS tiles are stored from the register kernels' fragments.
  if (succeeded(config) && op.getScores() &&
      config->getEpilogue() != KernelEpilogue::Registers) {
    op.emitOpError() << "stores dS tiles (scores) from the register key "
                        "kernel only: it needs C of 16, 32 or 64, d and dv "
                        "multiples of 16 with d + dv <= 256, 16-bit inputs "
                        "and the registers epilogue";
    return failure();
  }
  if (failed(config))
    return failure();
  // The register kernel's L2 prefetch of later steps' rows, by default where
  // it stores dS tiles (the build it was measured in).
  const bool registers = config->getEpilogue() == KernelEpilogue::Registers;
  return c.withPrefetch(
      config, registers && op.getScores() ? kKeyPrefetchSteps : 0,
      [&](int64_t ahead) -> std::optional<std::string> {
        if (ahead != 0 && !registers)
          return std::string("the staged key kernel does not prefetch");
        if (ahead == 1)
          return std::string("step s + 1's rows are being copied then: 0 or "
                             "2 and more");
        return std::nullopt;
      });
}

/// The configuration of `op`: each field `requested` (may be null) sets
/// kept when the op's kernels support it, every other one chosen.
FailureOr<KernelConfigAttr>
configureKernel(Operation *op, const GPUTargetFeatures &features,
                KernelConfigAttr requested,
                const KernelPreferences &preferences) {
  Configurer c(op, requested, features, preferences);
  return llvm::TypeSwitch<Operation *, FailureOr<KernelConfigAttr>>(op)
      .Case([&](ScoreTilesKernelOp k) { return configure(k, c); })
      .Case([&](SparseAttentionKernelOp k) { return configure(k, c); })
      .Case(
          [&](SparseAttentionGradQueriesKernelOp k) { return configure(k, c); })
      .Case([&](SparseAttentionGradKeysKernelOp k) { return configure(k, c); })
      // A quad of lanes a head row.
      .Case([&](SparseAttentionGradDeltaKernelOp) {
        return fixedDesign(c, KernelVariant::Simt, kGradThreads);
      })
      // A warp a query, four a block, dQ += dS K on mma.sync.
      // (The next block's dS tile asked of the L2: prefetch_ahead 1.)
      .Case([&](SparseAttentionGradQueriesFromScoresKernelOp) {
        return c.withPrefetch(
            fixedDesign(c, KernelVariant::MmaSync, kGradThreads), 1,
            [](int64_t ahead) -> std::optional<std::string> {
              if (ahead > 1)
                return std::string("this kernel asks for the next block's "
                                   "dS tile only: 0 or 1");
              return std::nullopt;
            });
      })
      .Case([&](SelectSingleStageKernelOp k) {
        return configureSingleStage(k, k.getQueries(), k.getTopk(),
                                    k.getBranching(), k.getBlockSize(),
                                    std::nullopt, c);
      })
      .Case([&](SelectDecodeKernelOp k) {
        return configureSingleStage(k, k.getQueries(), k.getTopk(),
                                    k.getBranching(), k.getBlockSize(),
                                    std::nullopt, c);
      })
      // The fused append runs in the decode block (kDecodeBlockThreads).
      .Case([&](AppendSelectSingleStageKernelOp k) {
        return configureSingleStage(k, k.getQueries(), k.getTopk(),
                                    k.getBranching(), k.getBlockSize(),
                                    kDecodeWarps, c);
      })
      // A packed batch's queries are many: a warp each.
      .Case([&](SelectSingleStageVarlenKernelOp k) {
        return configureSingleStage(k, k.getQueries(), k.getTopk(),
                                    k.getBranching(), k.getBlockSize(),
                                    int64_t(1), c);
      })
      // The tensor-core walk is latency-bound (ncu: L1 scoreboard stalls at
      // 5 blocks per SM with 106 registers); ptxas fits 8 blocks (64
      // registers) without spills for g*K <= 16, 6 (80) for 32.
      .Case([&](WalkKernelOp k) {
        const bool mma = k.getTensorCores();
        const int64_t candidates = k.getBranching() * k.getTopk();
        return fixedDesign(
            c, mma ? KernelVariant::MmaSync : KernelVariant::Simt,
            kQueryThreads, Hint::Free, mma ? (candidates <= 16 ? 8 : 6) : 0);
      })
      // A block of up to 1024 threads must launch whatever the last-leaf
      // path holds in registers: its size is told to ptxas.
      .Case([&](PyramidAppendKernelOp k) {
        int64_t d = cast<ShapedType>(k.getKeys().getType()).getShape()[3];
        return fixedDesign(c, KernelVariant::Simt, pyramidAppendThreads(d),
                           Hint::Free, 1);
      })
      .Case([&](PyramidKernelOp k) {
        return fixedDesign(c, KernelVariant::Simt, headsOf(k, k.getKeys()).dim);
      })
      .Case([&](PyramidVarlenKernelOp k) {
        return fixedDesign(
            c, KernelVariant::Simt,
            cast<ShapedType>(k.getKeys().getType()).getShape().back());
      })
      .Case([&](FragmentPlanesKernelOp) {
        return fixedDesign(c, KernelVariant::Simt, kFragmentPlanesThreads);
      })
      .Case([&](BucketKernelOp) {
        return fixedDesign(c, KernelVariant::Simt, kBucketThreads);
      })
      .Case([&](SelectFinalKernelOp) {
        return fixedDesign(c, KernelVariant::Simt, kQueryThreads);
      })
      .Case([&](LseScoreKernelOp) {
        return fixedDesign(c, KernelVariant::Simt, kQueryThreads);
      })
      .Default([&](Operation *other) -> FailureOr<KernelConfigAttr> {
        other->emitOpError("is not a kernel-level op: it has no kernel_config");
        return failure();
      });
}

/// Reports the first field `asked` sets that `complete` does not hold.
LogicalResult confirmFields(Operation *op, KernelConfigAttr asked,
                            KernelConfigAttr complete) {
  auto check = [&](StringRef field, auto askedValue,
                   auto completeValue) -> LogicalResult {
    if (!askedValue || askedValue == completeValue)
      return success();
    InFlightDiagnostic diag = op->emitOpError()
                              << kKernelConfigAttrName << " " << field << " = "
                              << text(*askedValue);
    if (!completeValue)
      diag << " does not apply to this op's kernel";
    else
      diag << " does not hold: with the other fields it is "
           << text(*completeValue);
    return failure();
  };
  auto opt = [](auto v) { return std::optional(v); };
  return success(
      succeeded(check("variant", opt(asked.getVariant()),
                      opt(complete.getVariant()))) &&
      succeeded(
          check("threads",
                asked.getThreads() ? opt(asked.getThreads()) : std::nullopt,
                opt(complete.getThreads()))) &&
      succeeded(check("warps_per_query", asked.getWarpsPerQuery(),
                      complete.getWarpsPerQuery())) &&
      succeeded(check("walk", asked.getWalk(), complete.getWalk())) &&
      succeeded(check("level_variant", asked.getLevelVariant(),
                      complete.getLevelVariant())) &&
      succeeded(check("rows_per_warp", asked.getRowsPerWarp(),
                      complete.getRowsPerWarp())) &&
      succeeded(check("tiles_per_block", asked.getTilesPerBlock(),
                      complete.getTilesPerBlock())) &&
      succeeded(
          check("epilogue", asked.getEpilogue(), complete.getEpilogue())) &&
      succeeded(check("union_queries", asked.getUnionQueries(),
                      complete.getUnionQueries())) &&
      succeeded(check("min_blocks_per_sm", asked.getMinBlocksPerSM(),
                      complete.getMinBlocksPerSM())) &&
      succeeded(check("prefetch_ahead", asked.getPrefetchAhead(),
                      complete.getPrefetchAhead())));
}
} // namespace

FailureOr<KernelConfigAttr>
mlir::pisa::completeKernelConfig(Operation *op,
                                 const GPUTargetFeatures &features,
                                 const KernelPreferences &preferences) {
  KernelConfigAttr asked = getKernelConfig(op);
  FailureOr<KernelConfigAttr> complete =
      configureKernel(op, features, asked, preferences);
  if (failed(complete) ||
      (asked && failed(confirmFields(op, asked, *complete))))
    return failure();
  return complete;
}
