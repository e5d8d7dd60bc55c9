//===- KernelConfigs.h - What the configure functions share -----*- C++ -*-===//
//
// --pisa-configure-kernels chooses each kernel-level op's kernel_config in
// one configure function per op family (selection: Selection/
// SelectionConfigs.cpp; attention and its backward: Attention/
// AttentionConfigs.cpp; the dispatch and the ops of one design:
// KernelConfigs.cpp). They share the Configurer (an asked field kept where
// the op's kernels follow it, else the chosen one) and the designs' rules
// declared here.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_KERNELCONFIGS_H
#define PISA_LIB_CONVERSION_PISATOGPU_KERNELCONFIGS_H

#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace mlir::pisa::detail {

inline std::string text(int64_t v) { return std::to_string(v); }
inline std::string text(KernelVariant v) {
  return stringifyKernelVariant(v).str();
}
inline std::string text(CandidateWalk v) {
  return stringifyCandidateWalk(v).str();
}
inline std::string text(KernelEpilogue v) {
  return stringifyKernelEpilogue(v).str();
}

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
    return asked ? asked.getVariant() : std::nullopt;
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
Heads headsOf(Operation *op, Value v);

/// The memref type of a tensor or memref value.
MemRefType memrefOf(Value v);

/// The elements of an op's queries.
Type queryElements(Value queries);

/// The configurations of the selection's kernels
/// (Selection/SelectionConfigs.cpp).
FailureOr<KernelConfigAttr> configure(ScoreTilesKernelOp op, Configurer &c);
/// The single-stage selection's (select_single_stage, its fused append form,
/// select_decode, the varlen form); `warps` for an op whose kernel gives a
/// query a fixed number of warps.
FailureOr<KernelConfigAttr> configureSingleStage(Operation *op, Value queries,
                                                 int64_t topK, int64_t fanout,
                                                 int64_t blockSize,
                                                 std::optional<int64_t> warps,
                                                 Configurer &c);

/// The configurations of sparse attention's kernels and its backward's
/// (Attention/AttentionConfigs.cpp).
FailureOr<KernelConfigAttr> configure(SparseAttentionKernelOp op,
                                      Configurer &c);
FailureOr<KernelConfigAttr> configure(SparseAttentionGradQueriesKernelOp op,
                                      Configurer &c);
FailureOr<KernelConfigAttr> configure(SparseAttentionGradKeysKernelOp op,
                                      Configurer &c);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_KERNELCONFIGS_H
