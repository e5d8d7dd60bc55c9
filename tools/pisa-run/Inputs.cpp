//===- Inputs.cpp - checks shared by pisa-run's commands ------------------===//

#include "Inputs.h"

#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/Support/Errors.h"

#include <cmath>
#include <cstring>

using namespace pisatool;
using mlir::pisa::invalidInput;

/// The first non-finite element, if any.
std::optional<int64_t> pisatool::firstNonFinite(const npy::Array &a) {
  int64_t n = a.numElements();
  if (a.dtype == npy::DType::F16) {
    const uint8_t *p = a.data.data();
    for (int64_t i = 0; i < n; ++i) {
      uint16_t bits = uint16_t(p[2 * i]) | uint16_t(p[2 * i + 1]) << 8;
      if ((bits & 0x7c00) == 0x7c00)
        return i;
    }
    return std::nullopt;
  }
  for (int64_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, a.data.data() + 4 * i, 4);
    if (!std::isfinite(v))
      return i;
  }
  return std::nullopt;
}

llvm::Error pisatool::checkParams(const SelectConfig &cfg) {
  if (cfg.blockSize < 1 || cfg.blockSize > mlir::pisa::kMaxBlockSize)
    return invalidInput("expected --block-size C in [1, " +
                        llvm::Twine(mlir::pisa::kMaxBlockSize) + "] but got " +
                        llvm::Twine(cfg.blockSize));
  if (cfg.branching < 2 || cfg.branching > mlir::pisa::kMaxBranching)
    return invalidInput("expected --branching g in [2, " +
                        llvm::Twine(mlir::pisa::kMaxBranching) + "] but got " +
                        llvm::Twine(cfg.branching));
  if (cfg.topK < 3 || cfg.topK > mlir::pisa::kMaxTopK)
    return invalidInput(
        "expected --topk K in [3, " + llvm::Twine(mlir::pisa::kMaxTopK) +
        "] (room for the forced blocks) but got " + llvm::Twine(cfg.topK));
  if (!(std::isfinite(cfg.scale) && cfg.scale > 0.0f))
    return invalidInput("expected a finite positive --scale but got " +
                        std::to_string(cfg.scale));
  return llvm::Error::success();
}
