//===- GPUTarget.h - The GPU targets pisa's kernels support -----*- C++ -*-===//
//
// pisa's kernels use bf16/f16 mma.sync and are tuned for Hopper's shared
// memory; they are built and tested for sm_90 only. Other chips are an
// error up front, never an LLVM "Cannot select" abort in the NVPTX backend.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_ANALYSIS_GPUTARGET_H
#define PISA_ANALYSIS_GPUTARGET_H

#include <optional>
#include <string>
#include <string_view>

namespace mlir::pisa {

/// Why (chip, format) cannot be compiled for, or nullopt when it can.
std::optional<std::string> unsupportedGPUTarget(std::string_view chip,
                                                std::string_view format);

} // namespace mlir::pisa

#endif // PISA_ANALYSIS_GPUTARGET_H
