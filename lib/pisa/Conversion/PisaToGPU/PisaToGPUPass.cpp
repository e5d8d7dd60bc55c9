//===- PisaToGPUPass.cpp - --convert-pisa-to-gpu --------------------------===//

#include "KernelBuilder.h"

#include "pisa/Conversion/Passes.h"
#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaDialect.h"
#include "pisa/IR/PisaOps.h"

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

/// The limits of the GPU kernels, checked on every pisa op before any IR is
/// built, so that a shape the kernels cannot take is one error naming the
/// limit (docs/gpu.md, "Supported shapes"), never wrong code or a generic
/// legalization failure.
static LogicalResult checkGPULimits(Operation *op) {
  auto staticShapes = [&](ValueRange values) -> LogicalResult {
    for (Value v : values)
      if (!cast<ShapedType>(v.getType()).hasStaticShape())
        return op->emitOpError()
               << "has a dynamic dimension in " << v.getType()
               << ": the GPU lowering requires static shapes";
    return success();
  };
  if (auto build = dyn_cast<PyramidBuildOp>(op)) {
    if (failed(staticShapes({build.getKeys(), build.getPyramid()})))
      return failure();
    int64_t d = build.getKeys().getType().getShape()[3];
    if (d > kMaxGPUHeadDim)
      return op->emitOpError() << "has head dim d = " << d
                               << " above the GPU limit of " << kMaxGPUHeadDim
                               << " (one thread per feature)";
    return success();
  }
  if (auto topk = dyn_cast<HierTopKOp>(op)) {
    if (failed(staticShapes(
            {topk.getQueries(), topk.getKeys(), topk.getPyramid()})))
      return failure();
    ArrayRef<int64_t> q = topk.getQueries().getType().getShape();
    ArrayRef<int64_t> k = topk.getKeys().getType().getShape();
    const int64_t groupSize = q[1] / k[1], candidates =
        int64_t(topk.getBranching()) * int64_t(topk.getTopk());
    if (candidates > kMaxGPUCandidates)
      return op->emitOpError()
             << "keeps g * K = " << candidates
             << " candidates per query, above the GPU limit of "
             << kMaxGPUCandidates << " (per-thread candidate lists)";
    if (q[0] * k[1] > kMaxGPUGroups)
      return op->emitOpError() << "has B * Hkv = " << q[0] * k[1]
                               << " above the GPU limit of " << kMaxGPUGroups
                               << " (grid y)";
    if (q[2] * candidates > kMaxGPUPairs)
      return op->emitOpError()
             << "has queries * g * K = " << q[2] * candidates
             << " above the GPU limit of " << kMaxGPUPairs
             << " (32-bit stage-2 pair indices)";
    if (topk.getCapacity())
      return op->emitOpError() << "reads a pyramid cache (capacity = "
                               << *topk.getCapacity()
                               << "): the GPU lowering takes pyramid_build's "
                                  "layout only, for now";
    ScheduleAttr schedule = topk.getScheduleAttr();
    if (schedule && schedule.getKind() == ScheduleKind::TwoStage &&
        schedule.getQTile() * groupSize > kMaxGPUThreads)
      return op->emitOpError()
             << "has q_tile * G = " << schedule.getQTile() * groupSize
             << " above the GPU limit of " << kMaxGPUThreads
             << " threads per stage-2 block";
    return success();
  }
  if (isa<PisaDialect>(op->getDialect()))
    return op->emitOpError() << "has no GPU lowering (the CPU pipeline, "
                                "pisa-cpu-pipeline, lowers it)";
  return success();
}

namespace {
struct ConvertPisaToGPUPass
    : public pisa::impl::ConvertPisaToGPUBase<ConvertPisaToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    bool ok = true;
    getOperation()->walk([&](Operation *op) {
      if (isa_and_nonnull<PisaDialect>(op->getDialect()))
        ok &= succeeded(checkGPULimits(op));
    });
    if (!ok)
      return signalPassFailure();
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
