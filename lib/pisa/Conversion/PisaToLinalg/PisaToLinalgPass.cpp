//===- PisaToLinalgPass.cpp - --convert-pisa-to-linalg --------------------===//

#include "pisa/Conversion/Passes.h"
#include "pisa/Conversion/PisaToLinalg/PisaToLinalg.h"
#include "pisa/IR/PisaDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::pisa {
#define GEN_PASS_DEF_CONVERTPISATOLINALG
#include "pisa/Conversion/Passes.h.inc"
} // namespace mlir::pisa

using namespace mlir;
using namespace mlir::pisa;

void mlir::pisa::populatePisaToLinalgConversionPatterns(
    RewritePatternSet &patterns) {
  populatePyramidBuildToLinalgPatterns(patterns);
  populateSelectionToLoopsPatterns(patterns);
  populateAttentionToLoopsPatterns(patterns);
  populateAttentionGradToLoopsPatterns(patterns);
  populateVarlenToLoopsPatterns(patterns);
  populateDecodeToLoopsPatterns(patterns);
}

namespace {
struct ConvertPisaToLinalgPass
    : public pisa::impl::ConvertPisaToLinalgBase<ConvertPisaToLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    ConversionTarget target(getContext());
    target.addIllegalDialect<PisaDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populatePisaToLinalgConversionPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
