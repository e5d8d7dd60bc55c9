//===- CheckGPUTarget.cpp - Reject unsupported GPU targets ----------------===//
//
// Runs first in pisa-lower-to-nvvm-pipeline so that a bad chip or format is
// one error and a non-zero exit, with nothing lowered or written.
//
//===----------------------------------------------------------------------===//

#include "pisa/Analysis/GPUTarget.h"
#include "pisa/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::pisa {
#define GEN_PASS_DEF_PISACHECKGPUTARGET
#include "pisa/Transforms/Passes.h.inc"
} // namespace mlir::pisa

using namespace mlir;

namespace {
struct PisaCheckGPUTargetPass
    : public pisa::impl::PisaCheckGPUTargetBase<PisaCheckGPUTargetPass> {
  using Base::Base;

  void runOnOperation() override {
    if (std::optional<std::string> why =
            pisa::unsupportedGPUTarget(chip, format)) {
      getOperation()->emitError(*why);
      signalPassFailure();
    }
  }
};
} // namespace
