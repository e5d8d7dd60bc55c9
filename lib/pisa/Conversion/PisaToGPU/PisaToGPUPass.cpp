//===- PisaToGPUPass.cpp - --convert-pisa-to-gpu --------------------------===//

#include "KernelBuilder.h"

#include "pisa/Conversion/Passes.h"
#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
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
  populatePyramidBuildToGPUPatterns(patterns);
  populateHierTopKToGPUPatterns(patterns);
}

/// True when `value` (a to_tensor of a result buffer) reaches a return.
static bool isReturned(Value value) {
  return llvm::any_of(value.getUsers(),
                      [](Operation *user) { return isa<func::ReturnOp>(user); });
}

void mlir::pisa::freeTransientDeviceBuffers(ModuleOp module) {
  module.walk([](gpu::AllocOp alloc) {
    if (!alloc->hasAttr(detail::kResultBufferAttr))
      return;
    alloc->removeAttr(detail::kResultBufferAttr);
    bool returned = llvm::any_of(alloc.getMemref().getUsers(), [](Operation *u) {
      auto toTensor = dyn_cast<bufferization::ToTensorOp>(u);
      return toTensor && isReturned(toTensor.getResult());
    });
    if (returned)
      return;
    auto func = alloc->getParentOfType<func::FuncOp>();
    func.walk([&](func::ReturnOp ret) {
      OpBuilder b(ret);
      gpu::DeallocOp::create(b, ret.getLoc(), Type(), ValueRange{},
                             alloc.getMemref());
    });
  });
}

namespace {
struct ConvertPisaToGPUPass
    : public pisa::impl::ConvertPisaToGPUBase<ConvertPisaToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ConversionTarget target(getContext());
    target.addIllegalDialect<PisaDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populatePisaToGPUConversionPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
    freeTransientDeviceBuffers(getOperation());
  }
};
} // namespace
