//===- PisaToGPUPass.cpp - --convert-pisa-to-gpu --------------------------===//

#include "KernelBuilder.h"

#include "pisa/Conversion/Passes.h"
#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaDialect.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
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

std::optional<std::string> mlir::pisa::gpuLimitViolation(Operation *op) {
  std::string why;
  llvm::raw_string_ostream os(why);
  if (auto build = dyn_cast<PyramidBuildOp>(op)) {
    int64_t d = build.getKeys().getType().getShape()[3];
    if (d <= kMaxGPUHeadDim)
      return std::nullopt;
    os << "has head dim d = " << d << " above the GPU limit of "
       << kMaxGPUHeadDim << " (one thread per feature)";
    return why;
  }
  if (auto topk = dyn_cast<HierTopKOp>(op)) {
    ArrayRef<int64_t> q = topk.getQueries().getType().getShape();
    ArrayRef<int64_t> k = topk.getKeys().getType().getShape();
    const int64_t groupSize = q[1] / k[1], candidates =
        int64_t(topk.getBranching()) * int64_t(topk.getTopk());
    auto known = [](int64_t size) { return !ShapedType::isDynamic(size); };
    ScheduleAttr schedule = topk.getScheduleAttr();
    if (candidates > kMaxGPUCandidates)
      os << "keeps g * K = " << candidates
         << " candidates per query, above the GPU limit of "
         << kMaxGPUCandidates << " (per-thread candidate lists)";
    else if (known(q[0]) && q[0] * k[1] > kMaxGPUGroups)
      os << "has B * Hkv = " << q[0] * k[1] << " above the GPU limit of "
         << kMaxGPUGroups << " (grid y)";
    else if (known(q[2]) && q[2] * candidates > kMaxGPUPairs)
      os << "has queries * g * K = " << q[2] * candidates
         << " above the GPU limit of " << kMaxGPUPairs
         << " (32-bit stage-2 pair indices)";
    else if (known(k[2]) && k[2] > kMaxGPUKeys)
      os << "has N = " << k[2] << " above the GPU limit of " << kMaxGPUKeys
         << " (32-bit leaf indices)";
    else if (topk.getCapacity())
      os << "reads a pyramid cache (capacity = " << *topk.getCapacity()
         << "): the GPU lowering takes pyramid_build's layout only, for now";
    else if (schedule && schedule.getKind() == ScheduleKind::TwoStage &&
             schedule.getQTile() * groupSize > kMaxGPUThreads)
      os << "has q_tile * G = " << schedule.getQTile() * groupSize
         << " above the GPU limit of " << kMaxGPUThreads
         << " threads per stage-2 block";
    else
      return std::nullopt;
    return why;
  }
  if (isa<PisaDialect>(op->getDialect()))
    return std::string("has no GPU lowering (the CPU pipeline, "
                       "pisa-cpu-pipeline, lowers it)");
  return std::nullopt;
}

namespace {
struct ConvertPisaToGPUPass
    : public pisa::impl::ConvertPisaToGPUBase<ConvertPisaToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    // Every limit is reported before any IR is built.
    bool ok = true;
    getOperation()->walk([&](Operation *op) {
      if (!isa_and_nonnull<PisaDialect>(op->getDialect()))
        return;
      if (std::optional<std::string> why = gpuLimitViolation(op)) {
        op->emitOpError() << *why;
        ok = false;
      }
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
