//===- PisaToGPU.h - pisa to gpu kernels patterns ---------------*- C++ -*-===//

#ifndef PISA_CONVERSION_PISATOGPU_PISATOGPU_H
#define PISA_CONVERSION_PISATOGPU_PISATOGPU_H

#include "pisa/Analysis/GPUTarget.h"
#include "pisa/IR/PisaAttrs.h"

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringMap.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir {
class DialectRegistry;
class MLIRContext;
class ModuleOp;
class Operation;
class RewritePatternSet;

namespace pisa {

/// Shapes the GPU kernels take (docs/gpu.md, "Supported shapes"); anything
/// beyond is a compile-time error of --convert-pisa-to-gpu naming the limit.
constexpr int64_t kMaxGPUHeadDim = 1024;   ///< one thread per feature
constexpr int64_t kMaxGPUCandidates = 512; ///< g * K per query
constexpr int64_t kMaxGPUGroups = 65535;   ///< B * Hkv (grid y)
constexpr int64_t kMaxGPUThreads = 1024;   ///< q_tile * G per block
constexpr int64_t kMaxGPUPairs = (int64_t(1) << 31) - 1; ///< queries * g * K
constexpr int64_t kMaxGPUKeys = (int64_t(1) << 31) - 1;  ///< N (i32 leaves)

/// Why the GPU kernels cannot take pisa op `op` (the limits above on static
/// sizes, from its KernelLoweringOpInterface; a pisa op without one has no
/// GPU lowering), or nullopt. --pisa-decompose-to-kernels reports it for
/// every op before building IR. Limits on dynamic sizes are checked at run
/// time (host assertions, a call's error in an AOT library).
std::optional<std::string> gpuLimitViolation(Operation *op);

/// Attaches each user-level op's KernelLoweringOpInterface model
/// (KernelLowering.cpp): its limits, its kernel-level ops, its AOT entry's
/// facts. registerAllDialects calls it.
void registerKernelLoweringExternalModels(DialectRegistry &registry);

/// The most queries a query tile takes (union_queries): a warp each and one
/// that copies the union's blocks, each warp keeping its rows' state in up
/// to 255 registers; 8 x 32 x 255 fill an SM's 65,536 (a ninth warp would
/// put three on one of the SM's four register files: 168 a lane).
constexpr int64_t kMaxUnionQueries = 7;

/// Designs --pisa-configure-kernels takes where an op's kernels support
/// them and its kernel_config leaves the choice open.
struct KernelPreferences {
  /// Query tiles of this many queries (union_queries, at most 7): the
  /// forward's and the backward's dq pass's (0: their per-query kernels,
  /// query tiles of 3 for a dq pass the register kernel does not take).
  int64_t attentionUnionQueries = 0;
  /// Fields asked of every op of one kind (keyed by the op's full name,
  /// pisa.kernel.*), over those its own kernel_config sets.
  llvm::StringMap<KernelConfigAttr> kernelConfigs;
};

/// Parses kernel-config entries "OP:FIELD=VALUE" (OP a kernel-level op's
/// name with or without its "pisa.kernel." prefix; FIELD and VALUE as in
/// #pisa.kernel_config) into `preferences.kernelConfigs`. Returns why an
/// entry is refused: no such kernel-level op, no such field, a bad value,
/// a field given twice for one op.
std::optional<std::string>
parseKernelConfigEntries(MLIRContext *context, ArrayRef<std::string> entries,
                         KernelPreferences &preferences);

/// The #pisa.kernel_config of kernel-level op `op` for a target with
/// `features` (docs/gpu.md, "Kernel configurations"): each field the op's
/// kernel_config already sets is kept, every other field is chosen (by
/// `preferences` where they apply). A field set that the op's kernels
/// cannot follow, that does not apply to the op or that contradicts the
/// others is an error on `op` naming it.
FailureOr<KernelConfigAttr>
completeKernelConfig(Operation *op, const GPUTargetFeatures &features,
                     const KernelPreferences &preferences = {});

/// Kernel-level ops (buffer form) with their kernel_config to gpu.func
/// kernels and their launches: pisa.kernel.pyramid, and the selection
/// kernels of both schedules.
void populatePyramidKernelToGPUPatterns(RewritePatternSet &patterns);
void populateSelectionKernelsToGPUPatterns(RewritePatternSet &patterns);
/// pisa.kernel.sparse_attention.
void populateAttentionKernelToGPUPatterns(RewritePatternSet &patterns);
void populatePisaToGPUConversionPatterns(RewritePatternSet &patterns);

/// In every function that holds kernel-level ops, memref.alloc,
/// memref.dealloc and memref.copy become gpu.alloc, gpu.dealloc and
/// gpu.memcpy: such host code only passes buffers between kernels, so each
/// of its buffers lives on the device.
void placeBuffersOnDevice(ModuleOp module);

} // namespace pisa
} // namespace mlir

#endif // PISA_CONVERSION_PISATOGPU_PISATOGPU_H
