//===- FastExp2ToNVVM.cpp - math.exp2 afn to ex2.approx.ftz.f32 -----------===//
//
// The kernels mark their softmax exponentials `math.exp2 fastmath<afn>`
// (fastExp2, KernelBuilder.h); this pass gives each the flushing MUFU
// instruction, element by element, before upstream's GPU-to-NVVM lowering
// would call libdevice's __nv_exp2f (non-flushing, three more
// instructions).
//
//===----------------------------------------------------------------------===//

#include "pisa/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::pisa {
#define GEN_PASS_DEF_PISAFASTEXP2TONVVM
#include "pisa/Conversion/Passes.h.inc"
} // namespace mlir::pisa

using namespace mlir;

namespace {
constexpr llvm::StringLiteral kEx2FtzF32 = "llvm.nvvm.ex2.approx.ftz.f32";

struct FastExp2ToNVVM : OpRewritePattern<math::Exp2Op> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(math::Exp2Op op,
                                PatternRewriter &rewriter) const override {
    if (!arith::bitEnumContainsAll(op.getFastmath(), arith::FastMathFlags::afn))
      return rewriter.notifyMatchFailure(op, "not fastmath<afn>");
    Type type = op.getType();
    Type f32 = rewriter.getF32Type();
    if (getElementTypeOrSelf(type) != f32)
      return rewriter.notifyMatchFailure(op, "not f32");
    auto vectorType = dyn_cast<VectorType>(type);
    if (vectorType && vectorType.isScalable())
      return rewriter.notifyMatchFailure(op, "scalable vector");

    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    StringAttr ex2Name = b.getStringAttr(kEx2FtzF32);
    auto ex2 = [&](Value x) -> Value {
      return LLVM::CallIntrinsicOp::create(b, f32, ex2Name, ValueRange{x})
          .getResult(0);
    };
    if (!vectorType) {
      rewriter.replaceOp(op, ex2(op.getOperand()));
      return success();
    }
    // Any shape: flattened, element by element, shaped back.
    auto flatType = VectorType::get({vectorType.getNumElements()}, f32);
    Value flat = op.getOperand();
    if (vectorType.getRank() != 1)
      flat = vector::ShapeCastOp::create(b, flatType, flat);
    SmallVector<Value> elements;
    for (int64_t i = 0; i < flatType.getNumElements(); ++i)
      elements.push_back(ex2(vector::ExtractOp::create(b, flat, i)));
    Value result = vector::FromElementsOp::create(b, flatType, elements);
    if (vectorType.getRank() != 1)
      result = vector::ShapeCastOp::create(b, vectorType, result);
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct PisaFastExp2ToNVVMPass
    : pisa::impl::PisaFastExp2ToNVVMBase<PisaFastExp2ToNVVMPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FastExp2ToNVVM>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
