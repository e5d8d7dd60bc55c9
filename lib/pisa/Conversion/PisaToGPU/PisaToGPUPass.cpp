//===- PisaToGPUPass.cpp - --convert-pisa-to-gpu --------------------------===//

#include "Attention/SparseAttention.h"
#include "Kernels/KernelBuilder.h"

#include "pisa/Conversion/Passes.h"
#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaDialect.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::pisa {
#define GEN_PASS_DEF_CONVERTPISATOGPU
#include "pisa/Conversion/Passes.h.inc"
} // namespace mlir::pisa

using namespace mlir;
using namespace mlir::pisa;

void mlir::pisa::populatePisaToGPUConversionPatterns(
    RewritePatternSet &patterns) {
  populatePyramidKernelToGPUPatterns(patterns);
  populateSelectionKernelsToGPUPatterns(patterns);
  populateAttentionKernelToGPUPatterns(patterns);
}

void mlir::pisa::placeBuffersOnDevice(ModuleOp module) {
  module.walk([](func::FuncOp func) {
    bool launchesKernels = false;
    func.walk([&](DestinationStyleOpInterface op) {
      launchesKernels |= isa<PisaDialect>(op->getDialect());
    });
    if (!launchesKernels)
      return;
    func.walk([](Operation *op) {
      OpBuilder b(op);
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        auto device = gpu::AllocOp::create(
            b, alloc.getLoc(), TypeRange{alloc.getType()}, ValueRange{},
            alloc.getDynamicSizes(), /*symbolOperands=*/ValueRange{},
            /*hostShared=*/nullptr);
        alloc.replaceAllUsesWith(device.getMemref());
        alloc.erase();
      } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        gpu::DeallocOp::create(b, dealloc.getLoc(), Type(), ValueRange{},
                               dealloc.getMemref());
        dealloc.erase();
      } else if (auto copy = dyn_cast<memref::CopyOp>(op)) {
        // A copy bufferization made (a cache appended to while the old one
        // is still used): device to device.
        gpu::MemcpyOp::create(b, copy.getLoc(), Type(), ValueRange{},
                              copy.getTarget(), copy.getSource());
        copy.erase();
      }
    });
  });
}

namespace {
struct ConvertPisaToGPUPass
    : public pisa::impl::ConvertPisaToGPUBase<ConvertPisaToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    // Each configuration must hold on the chip (gpuTargetFeatures).
    if (auto error = unsupportedGPUChip(chip)) {
      getOperation()->emitError(*error);
      return signalPassFailure();
    }
    // The kernel-level ops in buffer form are what this pass lowers.
    bool ok = true;
    getOperation()->walk([&](Operation *op) {
      if (!isa_and_nonnull<PisaDialect>(op->getDialect()))
        return;
      auto kernelOp = dyn_cast<DestinationStyleOpInterface>(op);
      if (kernelOp && kernelOp.hasPureBufferSemantics()) {
        // The kernels are built as the op's configuration says: one that
        // is complete and holds for this op on this chip.
        KernelConfigAttr config = getKernelConfig(op);
        if (!config) {
          op->emitOpError() << "has no " << kKernelConfigAttrName
                            << ": run --pisa-configure-kernels first "
                               "(pisa-lower-to-nvvm-pipeline does)";
          ok = false;
          return;
        }
        FailureOr<KernelConfigAttr> complete =
            completeKernelConfig(op, gpuTargetFeatures(chip));
        if (failed(complete)) {
          ok = false;
        } else if (*complete != config) {
          op->emitOpError() << "has an incomplete " << kKernelConfigAttrName
                            << " (" << config << ", complete: " << *complete
                            << "): run --pisa-configure-kernels";
          ok = false;
        }
        return;
      }
      op->emitOpError(kernelOp ? "expected the buffer form: bufferize first "
                                 "(one-shot-bufferize)"
                               : "expected kernel-level ops on buffers: run "
                                 "--pisa-decompose-to-kernels and bufferize "
                                 "first (pisa-lower-to-nvvm-pipeline does)");
      ok = false;
    });
    if (!ok)
      return signalPassFailure();
    placeBuffersOnDevice(getOperation());
    ConversionTarget target(getContext());
    target.addIllegalDialect<PisaDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populatePisaToGPUConversionPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
    // Nothing of the dialect is left, fused appends included.
    getOperation()->walk([&](Operation *op) {
      if (isa_and_nonnull<PisaDialect>(op->getDialect())) {
        op->emitOpError("was not lowered to the GPU");
        ok = false;
      }
    });
    if (!ok)
      return signalPassFailure();
  }
};
} // namespace
