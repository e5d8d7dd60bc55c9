//===- KernelConfigAttr.cpp - #pisa.kernel_config syntax and rules --------===//
//
// `#pisa.kernel_config<key = value, ...>`: the keys in any order, each at
// most once; printed in one fixed order with the absent ones left out. The
// rules here hold for every op; what one op's kernels support is checked by
// --pisa-configure-kernels (docs/gpu.md, "Kernel configurations").
//
//===----------------------------------------------------------------------===//

#include "pisa/IR/PisaAttrs.h"
#include "pisa/IR/PisaDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::pisa;

namespace {
/// The fields of a configuration while it is parsed.
struct Fields {
  std::optional<KernelVariant> variant, levelVariant;
  std::optional<int64_t> threads, warpsPerQuery, rowsPerWarp, tilesPerBlock,
      minBlocksPerSM, unionQueries, prefetchAhead;
  std::optional<CandidateWalk> walk;
  std::optional<KernelEpilogue> epilogue;
};

template <typename EnumT>
ParseResult parseEnum(AsmParser &parser, StringRef key,
                      std::optional<EnumT> (*symbolize)(StringRef),
                      StringRef allowed, std::optional<EnumT> &out) {
  SMLoc loc = parser.getCurrentLocation();
  std::string word;
  if (parser.parseKeywordOrString(&word))
    return failure();
  out = symbolize(word);
  if (!out)
    return parser.emitError(loc) << "expected " << key << " to be one of "
                                 << allowed << " but got '" << word << "'";
  return success();
}
} // namespace

Attribute KernelConfigAttr::parse(AsmParser &parser, Type) {
  Fields f;
  llvm::StringSet<> seen;
  SMLoc start = parser.getCurrentLocation();
  if (parser.parseLess())
    return {};
  // `<>`: nothing asked, every field chosen.
  if (succeeded(parser.parseOptionalGreater()))
    return KernelConfigAttr::get(parser.getContext(), std::nullopt, 0,
                                 std::nullopt, std::nullopt, std::nullopt,
                                 std::nullopt, std::nullopt, std::nullopt,
                                 std::nullopt, std::nullopt, std::nullopt);
  do {
    SMLoc loc = parser.getCurrentLocation();
    StringRef key;
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return {};
    if (!seen.insert(key).second) {
      parser.emitError(loc)
          << "kernel_config field '" << key << "' is given twice";
      return {};
    }
    auto integer = [&](std::optional<int64_t> &out) {
      int64_t v;
      if (parser.parseInteger(v))
        return failure();
      out = v;
      return success();
    };
    ParseResult r = failure();
    if (key == "variant")
      r = parseEnum(parser, key, symbolizeKernelVariant,
                    "simt, mma_sync, wgmma", f.variant);
    else if (key == "level_variant")
      r = parseEnum(parser, key, symbolizeKernelVariant,
                    "simt, mma_sync, wgmma", f.levelVariant);
    else if (key == "walk")
      r = parseEnum(parser, key, symbolizeCandidateWalk, "lanes, ranks",
                    f.walk);
    else if (key == "epilogue")
      r = parseEnum(parser, key, symbolizeKernelEpilogue, "registers, shared",
                    f.epilogue);
    else if (key == "threads")
      r = integer(f.threads);
    else if (key == "warps_per_query")
      r = integer(f.warpsPerQuery);
    else if (key == "rows_per_warp")
      r = integer(f.rowsPerWarp);
    else if (key == "tiles_per_block")
      r = integer(f.tilesPerBlock);
    else if (key == "min_blocks_per_sm")
      r = integer(f.minBlocksPerSM);
    else if (key == "union_queries")
      r = integer(f.unionQueries);
    else if (key == "prefetch_ahead")
      r = integer(f.prefetchAhead);
    else {
      parser.emitError(loc)
          << "unknown kernel_config field '" << key
          << "' (expected variant, threads, warps_per_query, walk, "
             "level_variant, rows_per_warp, tiles_per_block, epilogue, "
             "union_queries, min_blocks_per_sm or prefetch_ahead)";
      return {};
    }
    if (failed(r))
      return {};
  } while (succeeded(parser.parseOptionalComma()));
  if (parser.parseGreater())
    return {};
  // Threads 0 stands for "not chosen": a written value must be a count.
  if (f.threads == 0) {
    parser.emitError(start)
        << "expected kernel_config threads in [1, 1024] but got 0";
    return {};
  }
  return parser.getChecked<KernelConfigAttr>(
      start, parser.getContext(), f.variant, f.threads.value_or(0),
      f.warpsPerQuery, f.walk, f.levelVariant, f.rowsPerWarp, f.tilesPerBlock,
      f.epilogue, f.minBlocksPerSM, f.unionQueries, f.prefetchAhead);
}

void KernelConfigAttr::print(AsmPrinter &printer) const {
  printer << "<";
  llvm::ListSeparator comma;
  auto field = [&](StringRef key) -> raw_ostream & {
    return printer.getStream() << comma << key << " = ";
  };
  if (auto v = getVariant())
    field("variant") << stringifyKernelVariant(*v);
  if (getThreads())
    field("threads") << getThreads();
  if (auto v = getWarpsPerQuery())
    field("warps_per_query") << *v;
  if (auto v = getWalk())
    field("walk") << stringifyCandidateWalk(*v);
  if (auto v = getLevelVariant())
    field("level_variant") << stringifyKernelVariant(*v);
  if (auto v = getRowsPerWarp())
    field("rows_per_warp") << *v;
  if (auto v = getTilesPerBlock())
    field("tiles_per_block") << *v;
  if (auto v = getEpilogue())
    field("epilogue") << stringifyKernelEpilogue(*v);
  if (auto v = getUnionQueries())
    field("union_queries") << *v;
  if (auto v = getMinBlocksPerSM())
    field("min_blocks_per_sm") << *v;
  if (auto v = getPrefetchAhead())
    field("prefetch_ahead") << *v;
  printer << ">";
}

KernelConfigAttr KernelConfigAttr::overriddenBy(KernelConfigAttr over) const {
  if (!*this || !over)
    return over ? over : *this;
  auto pick = [](auto mine, auto theirs) { return theirs ? theirs : mine; };
  return KernelConfigAttr::get(
      getContext(), pick(getVariant(), over.getVariant()),
      over.getThreads() ? over.getThreads() : getThreads(),
      pick(getWarpsPerQuery(), over.getWarpsPerQuery()),
      pick(getWalk(), over.getWalk()),
      pick(getLevelVariant(), over.getLevelVariant()),
      pick(getRowsPerWarp(), over.getRowsPerWarp()),
      pick(getTilesPerBlock(), over.getTilesPerBlock()),
      pick(getEpilogue(), over.getEpilogue()),
      pick(getMinBlocksPerSM(), over.getMinBlocksPerSM()),
      pick(getUnionQueries(), over.getUnionQueries()),
      pick(getPrefetchAhead(), over.getPrefetchAhead()));
}

LogicalResult KernelConfigAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, std::optional<KernelVariant>,
    int64_t threads, std::optional<int64_t> warpsPerQuery,
    std::optional<CandidateWalk>, std::optional<KernelVariant> levelVariant,
    std::optional<int64_t> rowsPerWarp, std::optional<int64_t> tilesPerBlock,
    std::optional<KernelEpilogue>, std::optional<int64_t> minBlocksPerSM,
    std::optional<int64_t> unionQueries, std::optional<int64_t> prefetchAhead) {
  // Threads 0: not chosen yet (a hand-written configuration that
  // --pisa-configure-kernels completes). A block has at most 1024.
  if (threads < 0 || threads > 1024)
    return emitError() << "expected kernel_config threads in [1, 1024] but got "
                       << threads;
  if (warpsPerQuery && (*warpsPerQuery < 1 || *warpsPerQuery > 32))
    return emitError() << "expected kernel_config warps_per_query in [1, 32] "
                          "but got "
                       << *warpsPerQuery;
  if (levelVariant == KernelVariant::Wgmma)
    return emitError() << "expected kernel_config level_variant simt or "
                          "mma_sync (no walk level is scored with wgmma)";
  if (rowsPerWarp && *rowsPerWarp != 16 && *rowsPerWarp != 32)
    return emitError() << "expected kernel_config rows_per_warp 16 or 32 "
                          "(mma.sync's m16 rows, once or twice) but got "
                       << *rowsPerWarp;
  if (tilesPerBlock && *tilesPerBlock < 1)
    return emitError() << "expected kernel_config tiles_per_block >= 1 but got "
                       << *tilesPerBlock;
  // A union entry's mask has a bit per query of the block.
  if (unionQueries && (*unionQueries < 1 || *unionQueries > 32))
    return emitError() << "expected kernel_config union_queries in [1, 32] "
                          "but got "
                       << *unionQueries;
  // sm_90 holds at most 32 blocks per SM.
  if (minBlocksPerSM && (*minBlocksPerSM < 1 || *minBlocksPerSM > 32))
    return emitError() << "expected kernel_config min_blocks_per_sm in [1, "
                          "32] but got "
                       << *minBlocksPerSM;
  if (prefetchAhead && (*prefetchAhead < 0 || *prefetchAhead > 8))
    return emitError() << "expected kernel_config prefetch_ahead in [0, 8] "
                          "but got "
                       << *prefetchAhead;
  return success();
}
