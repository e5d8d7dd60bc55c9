//===- PisaToGPUPass.cpp - --convert-pisa-to-gpu --------------------------===//

#include "KernelBuilder.h"
#include "PyramidAppend.h"
#include "SparseAttention.h"

#include "pisa/Conversion/Passes.h"
#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaDialect.h"
#include "pisa/IR/PisaOps.h"

#include "llvm/Support/MathExtras.h"
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
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::pisa {
#define GEN_PASS_DEF_CONVERTPISATOGPU
#include "pisa/Conversion/Passes.h.inc"
} // namespace mlir::pisa

using namespace mlir;
using namespace mlir::pisa;

void mlir::pisa::populatePisaToGPUConversionPatterns(
    RewritePatternSet &patterns, const GPUTargetFeatures &features) {
  populatePyramidKernelToGPUPatterns(patterns);
  populateSelectionKernelsToGPUPatterns(patterns, features);
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

/// a * b for sizes and tiles (>= 0), INT64_MAX when it overflows: the
/// limits below compare products of attributes and static sizes that the
/// verifiers leave unbounded (the fuzzer found q_tile = 2^63 - 1).
static int64_t saturatingProduct(int64_t a, int64_t b) {
  int64_t product;
  return llvm::MulOverflow(a, b, product) ? INT64_MAX : product;
}

/// [B, H, T, X] of a 4-D operand's shape, whatever its layout.
static SmallVector<int64_t, 4> headMajorShape(ArrayRef<int64_t> s,
                                              bool tokenMajor) {
  return {s[0], s[headDimIndex(tokenMajor)], s[tokenDimIndex(tokenMajor)],
          s[3]};
}

std::optional<std::string> mlir::pisa::gpuLimitViolation(Operation *op) {
  std::string why;
  llvm::raw_string_ostream os(why);
  // The pyramid kernels: one thread per feature.
  auto headDimLimit = [&](int64_t d) -> std::optional<std::string> {
    if (d <= kMaxGPUHeadDim)
      return std::nullopt;
    os << "has head dim d = " << d << " above the GPU limit of "
       << kMaxGPUHeadDim << " (one thread per feature)";
    return why;
  };
  if (auto build = dyn_cast<PyramidBuildOp>(op))
    return headDimLimit(build.getKeys().getType().getShape()[3]);
  if (auto build = dyn_cast<PyramidBuildVarlenOp>(op))
    return headDimLimit(build.getKeys().getType().getShape()[2]);
  if (auto append = dyn_cast<PyramidAppendOp>(op))
    return headDimLimit(append.getKeys().getType().getShape()[3]);
  if (auto decode = dyn_cast<DecodeSelectOp>(op)) {
    const int64_t candidates =
        int64_t(decode.getBranching()) * int64_t(decode.getTopk());
    // [B, Hkv, ...] of the cache, whether the keys are paged or not.
    ArrayRef<int64_t> p = decode.getPyramid().getType().getShape();
    auto known = [](int64_t size) { return !ShapedType::isDynamic(size); };
    if (candidates > kMaxGPUCandidates)
      os << "keeps g * K = " << candidates
         << " candidates per query, above the GPU limit of "
         << kMaxGPUCandidates << " (per-thread candidate lists)";
    else if (known(p[0]) && saturatingProduct(p[0], p[1]) > kMaxGPUGroups)
      os << "has B * Hkv = " << saturatingProduct(p[0], p[1])
         << " above the GPU limit of "
         << kMaxGPUGroups << " (grid y)";
    else if (decode.getCapacity() > kMaxGPUKeys)
      os << "has a capacity Ncap = " << decode.getCapacity()
         << " above the GPU limit of " << kMaxGPUKeys
         << " (32-bit leaf indices)";
    else
      return std::nullopt;
    return why;
  }
  if (auto topk = dyn_cast<HierTopKOp>(op)) {
    SmallVector<int64_t, 4> q = headMajorShape(
        topk.getQueries().getType().getShape(), topk.getTokenMajor());
    SmallVector<int64_t, 4> k = headMajorShape(
        topk.getKeys().getType().getShape(), topk.getTokenMajor());
    const int64_t groupSize = q[1] / k[1], candidates =
        int64_t(topk.getBranching()) * int64_t(topk.getTopk());
    auto known = [](int64_t size) { return !ShapedType::isDynamic(size); };
    ScheduleAttr schedule = topk.getScheduleAttr();
    if (candidates > kMaxGPUCandidates)
      os << "keeps g * K = " << candidates
         << " candidates per query, above the GPU limit of "
         << kMaxGPUCandidates << " (per-thread candidate lists)";
    else if (known(q[0]) && saturatingProduct(q[0], k[1]) > kMaxGPUGroups)
      os << "has B * Hkv = " << saturatingProduct(q[0], k[1])
         << " above the GPU limit of "
         << kMaxGPUGroups << " (grid y)";
    else if (known(q[2]) && saturatingProduct(q[2], candidates) > kMaxGPUPairs)
      os << "has queries * g * K = " << saturatingProduct(q[2], candidates)
         << " above the GPU limit of " << kMaxGPUPairs
         << " (32-bit stage-2 pair indices)";
    else if (known(k[2]) && k[2] > kMaxGPUKeys)
      os << "has N = " << k[2] << " above the GPU limit of " << kMaxGPUKeys
         << " (32-bit leaf indices)";
    else if (topk.getCapacity() && schedule &&
             schedule.getKind() == ScheduleKind::TwoStage)
      os << "reads a pyramid cache (capacity = " << *topk.getCapacity()
         << ") with the two-stage schedule: the GPU reads caches with the "
            "single-stage kernel only, for now (give "
            "#pisa.schedule<single_stage, ...>)";
    else if (schedule && schedule.getKind() == ScheduleKind::TwoStage &&
             saturatingProduct(schedule.getQTile(), groupSize) >
                 kMaxGPUThreads)
      os << "has q_tile * G = " << schedule.getQTile() << " * " << groupSize
         << " above the GPU limit of " << kMaxGPUThreads
         << " threads per stage-2 block";
    else
      return std::nullopt;
    return why;
  }
  if (auto topk = dyn_cast<HierTopKVarlenOp>(op)) {
    const int64_t candidates =
        int64_t(topk.getBranching()) * int64_t(topk.getTopk());
    const int64_t kvHeads = topk.getKeys().getType().getShape()[1];
    if (candidates > kMaxGPUCandidates)
      os << "keeps g * K = " << candidates
         << " candidates per query, above the GPU limit of "
         << kMaxGPUCandidates << " (per-thread candidate lists)";
    else if (kvHeads > kMaxGPUGroups)
      os << "has Hkv = " << kvHeads << " above the GPU limit of "
         << kMaxGPUGroups << " (grid y)";
    else if (ScheduleAttr schedule = topk.getScheduleAttr();
             schedule && schedule.getKind() == ScheduleKind::TwoStage &&
             saturatingProduct(
                 schedule.getQTile(),
                 topk.getQueries().getType().getShape()[1] / kvHeads) >
                 kMaxGPUThreads)
      os << "has q_tile * G = " << schedule.getQTile() << " * "
         << topk.getQueries().getType().getShape()[1] / kvHeads
         << " above the GPU limit of " << kMaxGPUThreads
         << " threads per stage-2 block";
    else
      return std::nullopt;
    return why;
  }
  if (auto attention = dyn_cast<SparseAttentionOp>(op)) {
    SmallVector<int64_t, 4> q = headMajorShape(
        attention.getQueries().getType().getShape(), attention.getTokenMajor());
    SmallVector<int64_t, 4> k = headMajorShape(
        attention.getKeys().getType().getShape(), attention.getTokenMajor());
    const int64_t dv = attention.getValues().getType().getShape()[3];
    if (auto why = detail::attentionLimitViolation(
            attention.getQueries().getType().getElementType(), q[1] / k[1],
            q[3], dv, attention.getBlockSize(),
            attention.getSelection().getType().getShape()[3]))
      return why;
    if (!ShapedType::isDynamic(q[0]) &&
        saturatingProduct(q[0], k[1]) > kMaxGPUGroups)
      os << "has B * Hkv = " << saturatingProduct(q[0], k[1])
         << " above the GPU limit of " << kMaxGPUGroups << " (grid y)";
    else if (!ShapedType::isDynamic(q[2]) && q[2] > kMaxGPUKeys)
      os << "has Nq = " << q[2] << " above the GPU limit of " << kMaxGPUKeys
         << " (grid x)";
    else
      return std::nullopt;
    return why;
  }
  if (auto score = dyn_cast<LseScoreOp>(op)) {
    // A warp per (query, batch x KV head): Nq / 4 blocks by B * Hkv.
    ArrayRef<int64_t> q = score.getQueries().getType().getShape();
    const int64_t kvHeads = score.getChildren().getType().getShape()[1];
    APInt offset;
    if (!ShapedType::isDynamic(q[0]) &&
        saturatingProduct(q[0], kvHeads) > kMaxGPUGroups)
      os << "has B * Hkv = " << saturatingProduct(q[0], kvHeads)
         << " above the GPU limit of " << kMaxGPUGroups << " (grid y)";
    else if (!ShapedType::isDynamic(q[2]) && q[2] > kMaxGPUKeys)
      os << "has Nq = " << q[2] << " above the GPU limit of " << kMaxGPUKeys
         << " (grid x)";
    else if (matchPattern(score.getQueryOffset(), m_ConstantInt(&offset)) &&
             offset.getSExtValue() > kMaxGPUKeys)
      os << "has query_offset = " << offset.getSExtValue()
         << " above the GPU limit of " << kMaxGPUKeys << " (i32 positions)";
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
    // The chip picks the kernels (gpuTargetFeatures).
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
      if (kernelOp && kernelOp.hasPureBufferSemantics())
        return;
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
    // An append that a decode step's selection runs first is lowered with
    // that selection, which erases it (PyramidAppend.h).
    target.addDynamicallyLegalOp<PyramidAppendKernelOp>(
        [](PyramidAppendKernelOp op) { return pisa::detail::isRunBySelection(op); });
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populatePisaToGPUConversionPatterns(patterns, gpuTargetFeatures(chip));
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
