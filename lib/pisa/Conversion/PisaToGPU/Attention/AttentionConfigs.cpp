//===- AttentionConfigs.cpp - Sparse attention's kernel_config -----------===//
//
// The forward's kernels (register, staged, query tiles) and the backward's
// query and key kernels: which design, epilogue, query tile, occupancy and
// L2 prefetch (docs/gpu.md, "Kernel configurations").
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionGrad.h"
#include "Attention/QueryTiles.h"
#include "Attention/SparseAttention.h"
#include "Attention/WarpQueryGrad.h"
#include "KernelConfigs.h"
#include "Selection/QueryKernels.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

namespace {

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

/// The sizes an attention op's kernels are chosen by: G query heads a KV
/// head, head dimensions d and dv, block size C, K entries a query.
struct AttentionSizes {
  Type elem;
  int64_t G, d, dv, C, topK;
};
template <typename OpT> AttentionSizes sizesOf(OpT op) {
  Heads q = headsOf(op, op.getQueries());
  return {queryElements(op.getQueries()),
          q.heads / headsOf(op, op.getKeys()).heads,
          q.dim,
          headsOf(op, op.getValues()).dim,
          static_cast<int64_t>(op.getBlockSize()),
          headsOf(op, op.getSelection()).dim};
}

/// `config` with prefetch_ahead for a kernel of WarpPerQuery.h (the
/// register attention and dq kernels: entry j + n's K and V rows asked of
/// the L2 at entry j): none unless asked, and only there.
FailureOr<KernelConfigAttr>
withEntryPrefetch(FailureOr<KernelConfigAttr> config, Configurer &c) {
  if (failed(config))
    return failure();
  const bool registerKernel =
      config->getEpilogue() == KernelEpilogue::Registers &&
      !config->getUnionQueries();
  return c.withPrefetch(
      config, 0, [&](int64_t ahead) -> std::optional<std::string> {
        if (ahead != 0 && !registerKernel)
          return std::string("only the register kernel (a warp a query, "
                             "epilogue registers, no union_queries) "
                             "prefetches");
        return std::nullopt;
      });
}

/// Sparse attention's design: the register kernel where the query's heads
/// and tiles fit a lane's registers (attendsInRegisters), else the staged
/// one; the query-tile kernel where union_queries asks for it.
FailureOr<KernelConfigAttr> attentionDesign(SparseAttentionKernelOp op,
                                            Configurer &c) {
  const AttentionSizes s = sizesOf(op);
  const bool tilesFit = attendsOnQueryTiles(s.elem, s.G, s.d, s.dv, s.C);
  auto tileBytes = [&](int64_t queries) {
    return QueryTileAttentionPlan(queries, s.d, s.dv, s.C, s.topK).bytes;
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
      op, c, attendsInRegisters(s.elem, s.G, s.d, s.dv, s.C),
      "the register kernel needs G <= 16, d a multiple of 32 up to 128, dv "
      "of 8 up to 128, C of 16 up to 64 and 16-bit inputs",
      kAttentionThreads, "sparse attention runs on mma_sync", s.C,
      [&](bool inRegisters, bool) {
        return inRegisters ? RegisterAttentionPlan(s.d, s.dv, s.C, s.topK).bytes
                           : AttentionTiles(s.G, s.d, s.dv, s.C, s.topK).bytes;
      });
}

/// The backward's query kernel: the register kernel (a warp a query, dQ in
/// registers, QueryGradInRegisters.cpp) where it takes the sizes
/// (queryGradInRegisters), else query tiles of kGradTileQueries where they
/// do (queryTileGradFits), else staged (a query a block). Query tiles of W
/// where union_queries asks for them, or the pipeline prefers them.
FailureOr<KernelConfigAttr>
queryGradDesign(SparseAttentionGradQueriesKernelOp op, Configurer &c) {
  const AttentionSizes s = sizesOf(op);
  const bool tilesFit = queryTileGradFits(s.elem, s.G, s.d, s.dv, s.C);
  const bool registersFit = queryGradInRegisters(s.elem, s.G, s.d, s.dv, s.C);
  auto tileBytes = [&](int64_t queries) {
    return QueryTileGradPlan(queries, s.d, s.dv, s.C, s.topK).bytes;
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
      "this op's kernel runs on mma_sync", s.C, [&](bool inRegisters, bool) {
        return inRegisters ? RegisterQueryGradPlan(s.d, s.dv, s.C, s.topK).bytes
                           : QueryGradPlan(s.G, s.d, s.dv, s.C, s.topK).bytes;
      });
}

} // namespace

/// Sparse attention: its design, and where it is the register kernel the
/// entries ahead whose K and V rows it asks of the L2 (none by default).
FailureOr<KernelConfigAttr>
mlir::pisa::detail::configure(SparseAttentionKernelOp op, Configurer &c) {
  return withEntryPrefetch(attentionDesign(op, c), c);
}

/// The backward's query kernel: its design, and where it is the register
/// kernel the entries ahead whose K and V rows it asks of the L2 (none by
/// default).
FailureOr<KernelConfigAttr>
mlir::pisa::detail::configure(SparseAttentionGradQueriesKernelOp op,
                              Configurer &c) {
  return withEntryPrefetch(queryGradDesign(op, c), c);
}

/// The backward's key kernel: dK and dV in registers where they fit a
/// lane's (keyGradientsInRegisters), else staged.
FailureOr<KernelConfigAttr>
mlir::pisa::detail::configure(SparseAttentionGradKeysKernelOp op,
                              Configurer &c) {
  const AttentionSizes s = sizesOf(op);
  FailureOr<KernelConfigAttr> config = registerOrStaged(
      op, c, keyGradientsInRegisters(s.elem, s.d, s.dv, s.C),
      "the register key kernel needs C of 16, 32 or 64, d and dv multiples "
      "of 16 with d + dv <= 256 and 16-bit inputs",
      kGradThreads, "this op's kernel runs on mma_sync or wgmma", s.C,
      [&](bool inRegisters, bool warpgroup) {
        return KeyGradPlan(s.G, s.d, s.dv, s.C, inRegisters, warpgroup).bytes;
      },
      [&](bool inRegisters) -> std::optional<std::string> {
        if (!inRegisters)
          return std::string("the staged key kernel runs on mma_sync");
        if (!c.features.warpgroupMma ||
            !keyGradientsOnWarpgroup(s.elem, s.d, s.dv, s.C))
          return kKeyGradWarpgroupNeeds.str();
        return std::nullopt;
      });
  // The dS tiles are stored from the register kernels' fragments.
  if (succeeded(config) && op.getScores() &&
      config->getEpilogue() != KernelEpilogue::Registers) {
    if (c.field(&KernelConfigAttr::getEpilogue)) {
      op.emitOpError() << kKernelConfigAttrName
                       << " epilogue = shared is not supported here: this "
                          "key kernel stores dS tiles (scores), which only "
                          "the register key kernel does";
      return failure();
    }
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
