//===- DecomposeToKernels.cpp - --pisa-decompose-to-kernels ---------------===//
//
// The GPU lowering's first step: each user-level pisa op replaces itself
// by its kernel-level ops through its KernelLoweringOpInterface model (the
// models: lib/pisa/Conversion/PisaToGPU/KernelLowering.cpp). Every op is
// checked, and every limit reported, before any IR changes.
//
//===----------------------------------------------------------------------===//

#include "pisa/IR/PisaDialect.h"
#include "pisa/IR/PisaInterfaces.h"
#include "pisa/IR/PisaOps.h"
#include "pisa/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::pisa {
#define GEN_PASS_DEF_PISADECOMPOSETOKERNELS
#include "pisa/Transforms/Passes.h.inc"
} // namespace mlir::pisa

using namespace mlir;
using namespace mlir::pisa;

namespace {
struct PisaDecomposeToKernelsPass
    : public pisa::impl::PisaDecomposeToKernelsBase<
          PisaDecomposeToKernelsPass> {
  using Base::Base;
  void runOnOperation() override {
    if (gradDqFromScores)
      getOperation()->walk([&](SparseAttentionGradOp op) {
        op->setAttr(kDqFromScoresAttrName, UnitAttr::get(&getContext()));
      });
    bool ok = true;
    SmallVector<KernelLoweringOpInterface> ops;
    getOperation()->walk([&](Operation *op) {
      if (!isa_and_nonnull<PisaDialect>(op->getDialect()) ||
          isKernelLevelOp(op))
        return; // not pisa, or already kernel-level
      auto lowering = dyn_cast<KernelLoweringOpInterface>(op);
      if (!lowering) {
        op->emitOpError(kNoGPULoweringError);
        ok = false;
      } else if (failed(lowering.verifyKernelDecomposition())) {
        ok = false;
      } else {
        ops.push_back(lowering);
      }
    });
    if (!ok)
      return signalPassFailure();
    IRRewriter rewriter(&getContext());
    for (KernelLoweringOpInterface op : ops)
      op.decomposeToKernels(rewriter);
  }
};
} // namespace
