//===- KernelConfigs.cpp - Each kernel-level op's #pisa.kernel_config ----===//
//
// The one place the GPU lowering's decisions are made: for each kernel-level
// op, which kernel variant, how many threads, the tile scorer's rows per
// warp and epilogue, the single-stage walk's warps per query, and the
// occupancy ptxas keeps registers for. --pisa-configure-kernels writes them
// as the op's kernel_config and --convert-pisa-to-gpu only reads them
// (docs/gpu.md, "Kernel configurations"). A field a configuration already
// sets is kept when the op's kernels support it: anyone can try another
// variant from the IR. This file dispatches each op to its configure
// function (the selection's in Selection/SelectionConfigs.cpp, attention's
// and its backward's in Attention/AttentionConfigs.cpp), configures the ops
// of one design itself, confirms the asked fields and reads the fields the
// kernel-config option asks of every op of one kind.
//
//===----------------------------------------------------------------------===//

#include "KernelConfigs.h"
#include "Attention/AttentionGrad.h"
#include "Pyramid/PyramidAppend.h"
#include "Selection/QueryKernels.h"
#include "Selection/TileScoring.h"
#include "Selection/WarpWalkMMA.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

Heads mlir::pisa::detail::headsOf(Operation *op, Value v) {
  ArrayRef<int64_t> s = cast<ShapedType>(v.getType()).getShape();
  const bool tokenMajor = op->hasAttr("token_major");
  return {s[headDimIndex(tokenMajor)], s[tokenDimIndex(tokenMajor)], s[3]};
}

MemRefType mlir::pisa::detail::memrefOf(Value v) {
  auto shaped = cast<ShapedType>(v.getType());
  return MemRefType::get(shaped.getShape(), shaped.getElementType());
}

Type mlir::pisa::detail::queryElements(Value queries) {
  return cast<ShapedType>(queries.getType()).getElementType();
}

namespace {

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
      succeeded(check("variant", asked.getVariant(), complete.getVariant())) &&
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
  auto forKind = preferences.kernelConfigs.find(op->getName().getStringRef());
  if (forKind != preferences.kernelConfigs.end())
    asked = asked.overriddenBy(forKind->second);
  FailureOr<KernelConfigAttr> complete =
      configureKernel(op, features, asked, preferences);
  if (failed(complete) ||
      (asked && failed(confirmFields(op, asked, *complete))))
    return failure();
  return complete;
}

std::optional<std::string>
mlir::pisa::parseKernelConfigEntries(MLIRContext *context,
                                     ArrayRef<std::string> entries,
                                     KernelPreferences &preferences) {
  constexpr StringRef prefix = "pisa.kernel.";
  context->getOrLoadDialect<PisaDialect>();
  // Each op's FIELD=VALUE texts, in the order given, parsed as one
  // #pisa.kernel_config (its parser names a field given twice).
  std::vector<std::pair<std::string, std::string>> fields;
  for (const std::string &entry : entries) {
    auto [name, field] = StringRef(entry).split(':');
    if (field.empty() || !field.contains('='))
      return "expected kernel-config 'OP:FIELD=VALUE' (e.g. "
             "'sparse_attention:prefetch_ahead=2') but got '" +
             entry + "'";
    std::string full =
        name.starts_with(prefix) ? name.str() : (prefix + name).str();
    std::optional<RegisteredOperationName> registered =
        RegisteredOperationName::lookup(full, context);
    if (!registered || !registered->hasInterface<DestinationStyleOpInterface>())
      return "kernel-config '" + entry + "': '" + name.str() +
             "' is not a kernel-level op (pisa.kernel.*)";
    auto it = llvm::find_if(fields, [&](auto &f) { return f.first == full; });
    if (it == fields.end())
      it = fields.insert(fields.end(), {full, ""});
    it->second += (it->second.empty() ? "" : ", ") + field.str();
  }
  for (auto &[name, text] : fields) {
    std::string why;
    ScopedDiagnosticHandler capture(context, [&](Diagnostic &d) {
      if (why.empty())
        why = d.str();
      return success();
    });
    std::string source = "#pisa.kernel_config<" + text + ">";
    size_t read = 0;
    auto config = dyn_cast_or_null<KernelConfigAttr>(
        parseAttribute(source, context, Type(), &read));
    if (!config || read != source.size())
      return "kernel-config of " + name + ": " +
             (why.empty() ? "expected FIELD=VALUE but got '" + text + "'"
                          : why);
    preferences.kernelConfigs[name] = config;
  }
  return std::nullopt;
}
