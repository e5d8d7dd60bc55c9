//===- ConfigureKernels.cpp - --pisa-configure-kernels -------------------===//

#include "pisa/Conversion/Passes.h"
#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaOps.h"

namespace mlir::pisa {
#define GEN_PASS_DEF_PISACONFIGUREKERNELS
#include "pisa/Conversion/Passes.h.inc"
} // namespace mlir::pisa

using namespace mlir;
using namespace mlir::pisa;

namespace {
struct PisaConfigureKernelsPass
    : public pisa::impl::PisaConfigureKernelsBase<PisaConfigureKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (auto error = unsupportedGPUChip(chip)) {
      getOperation()->emitError(*error);
      return signalPassFailure();
    }
    const int64_t unionQueries = attentionUnionQueries;
    if (unionQueries < 0 || unionQueries > kMaxUnionQueries) {
      getOperation()->emitError()
          << "expected attention-union-queries in [0, " << kMaxUnionQueries
          << "] but got " << unionQueries;
      return signalPassFailure();
    }
    const GPUTargetFeatures features = gpuTargetFeatures(chip);
    KernelPreferences preferences;
    preferences.attentionUnionQueries = unionQueries;
    if (auto error = parseKernelConfigEntries(&getContext(), kernelConfig,
                                              preferences)) {
      getOperation()->emitError(*error);
      return signalPassFailure();
    }
    bool ok = true;
    getOperation()->walk([&](Operation *op) {
      if (!isKernelLevelOp(op))
        return;
      FailureOr<KernelConfigAttr> config =
          completeKernelConfig(op, features, preferences);
      if (failed(config)) {
        ok = false;
        return;
      }
      op->setAttr(kKernelConfigAttrName, *config);
    });
    if (!ok)
      signalPassFailure();
  }
};
} // namespace
