//===- GPUTarget.h - The GPU targets pisa's kernels support -----*- C++ -*-===//
//
// pisa's kernels use bf16/f16 mma.sync (and, on sm_90a, wgmma) and are
// tuned for Hopper's shared memory; they are built and tested for sm_90 and
// sm_90a only. Other chips are an error up front, never an LLVM "Cannot
// select" abort in the NVPTX backend. The one definition of what each
// supported chip offers the lowering.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_ANALYSIS_GPUTARGET_H
#define PISA_ANALYSIS_GPUTARGET_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mlir::pisa {

/// Why `chip` cannot be compiled for, or nullopt when it can.
std::optional<std::string> unsupportedGPUChip(std::string_view chip);

/// Why (chip, format) cannot be compiled for, or nullopt when it can.
std::optional<std::string> unsupportedGPUTarget(std::string_view chip,
                                                std::string_view format);

/// What a supported chip offers beyond sm_90's instructions.
struct GPUTargetFeatures {
  /// wgmma (sm_90a only): stage 2 scores 64-row tiles on warpgroup tensor
  /// cores.
  bool warpgroupMma = false;
};
/// Threads of the decode selection's block (16 warps for a query's one
/// batch x KV head, SingleStageToGPU.cpp); a decode step's append runs in
/// the same block when d divides it (pisa.kernel.append_select_single_stage).
constexpr int64_t kDecodeBlockThreads = 512;

/// The features of `chip` (one unsupportedGPUChip accepts).
GPUTargetFeatures gpuTargetFeatures(std::string_view chip);

} // namespace mlir::pisa

#endif // PISA_ANALYSIS_GPUTARGET_H
