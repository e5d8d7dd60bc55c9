//===- GPUTarget.cpp - The GPU targets pisa's kernels support -------------===//

#include "pisa/Analysis/GPUTarget.h"

std::optional<std::string>
mlir::pisa::unsupportedGPUChip(std::string_view chip) {
  if (chip != "sm_90" && chip != "sm_90a")
    return "unsupported GPU chip '" + std::string(chip) +
           "': pisa's kernels are built for sm_90 and sm_90a (Hopper) only";
  return std::nullopt;
}

std::optional<std::string>
mlir::pisa::unsupportedGPUTarget(std::string_view chip,
                                 std::string_view format) {
  if (auto why = unsupportedGPUChip(chip))
    return why;
  if (format != "isa" && format != "bin" && format != "fatbin")
    return "unsupported GPU binary format '" + std::string(format) +
           "': expected isa, bin or fatbin";
  return std::nullopt;
}

mlir::pisa::GPUTargetFeatures
mlir::pisa::gpuTargetFeatures(std::string_view chip) {
  GPUTargetFeatures features;
  features.warpgroupMma = chip == "sm_90a";
  return features;
}
