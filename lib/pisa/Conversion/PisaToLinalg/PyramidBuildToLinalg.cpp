//===- PyramidBuildToLinalg.cpp - pyramid_build to structured ops ---------===//
//
// Each level is one structured reduction: zero-pad the level below to a
// whole number of groups, view it as [B, H, M, group, d], sum over the group
// with linalg.reduce (widening to f32), then divide every node by the number
// of children it really has (the last group may be partial). The levels are
// inserted into the packed [B, H, P, d] result at their PyramidLayout rows.
//
//===----------------------------------------------------------------------===//

#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/Conversion/PisaToLinalg/PisaToLinalg.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Utils/Utils.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::pisa;

/// Mean of consecutive groups of `group` rows (dim 2) of `input`
/// [B, H, n, d]; the last group averages only the rows it has.
static Value poolMean(ImplicitLocOpBuilder &b, Value input, int64_t group,
                      int64_t numGroups) {
  auto inType = cast<RankedTensorType>(input.getType());
  ArrayRef<int64_t> shape = inType.getShape();
  const int64_t n = shape[2];
  Type elemType = inType.getElementType();
  Type f32 = b.getF32Type();

  if (numGroups * group != n) {
    auto paddedType = RankedTensorType::get(
        {shape[0], shape[1], numGroups * group, shape[3]}, elemType);
    Value zero = arith::ConstantOp::create(b, b.getZeroAttr(elemType));
    input = tensor::createPadHighOp(paddedType, input, zero, /*nofold=*/false,
                                    b.getLoc(), b);
  }
  auto groupedType = RankedTensorType::get(
      {shape[0], shape[1], numGroups, group, shape[3]}, elemType);
  Value grouped = tensor::ExpandShapeOp::create(
      b, groupedType, input,
      ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}, {4}});

  SmallVector<int64_t> outShape{shape[0], shape[1], numGroups, shape[3]};
  Value empty = tensor::EmptyOp::create(b, outShape, f32);
  Value zeroF = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0f));
  Value init = linalg::FillOp::create(b, ValueRange{zeroF}, ValueRange{empty})
                   .getResult(0);
  Value sum =
      linalg::ReduceOp::create(
          b, ValueRange{grouped}, ValueRange{init}, /*dimensions=*/{3},
          [&](OpBuilder &nb, Location loc, ValueRange args) {
            Value x = args[0];
            if (x.getType() != f32)
              x = arith::ExtFOp::create(nb, loc, f32, x);
            Value acc = arith::AddFOp::create(nb, loc, x, args[1]);
            linalg::YieldOp::create(nb, loc, acc);
          })
          .getResult(0);

  // node i averages min(group, n - i*group) rows.
  AffineMap id = b.getMultiDimIdentityMap(4);
  SmallVector<utils::IteratorType> parallel(4, utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, TypeRange{sum.getType()}, ValueRange{}, ValueRange{sum},
             ArrayRef<AffineMap>{id}, parallel, /*doc=*/"", /*libraryCall=*/"",
             [&](OpBuilder &nb, Location loc, ValueRange args) {
               ImplicitLocOpBuilder ib(loc, nb);
               Value i = linalg::IndexOp::create(ib, 2);
               Value groupC = arith::ConstantIndexOp::create(ib, group);
               Value rest = arith::SubIOp::create(
                   ib, arith::ConstantIndexOp::create(ib, n),
                   arith::MulIOp::create(ib, i, groupC));
               Value count = arith::MinSIOp::create(ib, rest, groupC);
               Value countF = arith::SIToFPOp::create(
                   ib, ib.getF32Type(),
                   arith::IndexCastOp::create(ib, ib.getI64Type(), count));
               linalg::YieldOp::create(
                   ib, ValueRange{arith::DivFOp::create(ib, args[0], countF)});
             })
      .getResult(0);
}

namespace {
struct PyramidBuildToLinalg : OpRewritePattern<PyramidBuildOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PyramidBuildOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType keysType = op.getKeys().getType();
    RankedTensorType resultType = op.getPyramid().getType();
    if (!keysType.hasStaticShape() || !resultType.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "requires static shapes");
    ArrayRef<int64_t> shape = keysType.getShape();
    PyramidLayout layout(shape[2], op.getBlockSize(), op.getBranching());
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);

    Value packed = tensor::EmptyOp::create(b, resultType.getShape(),
                                           resultType.getElementType());
    Value level = op.getKeys();
    int64_t group = op.getBlockSize();
    for (int64_t l = 1; l <= layout.numLevels(); ++l) {
      Value mean = poolMean(b, level, group, layout.size(l));
      SmallVector<OpFoldResult> offsets{b.getIndexAttr(0), b.getIndexAttr(0),
                                        b.getIndexAttr(layout.offset(l)),
                                        b.getIndexAttr(0)};
      SmallVector<OpFoldResult> sizes{
          b.getIndexAttr(shape[0]), b.getIndexAttr(shape[1]),
          b.getIndexAttr(layout.size(l)), b.getIndexAttr(shape[3])};
      SmallVector<OpFoldResult> strides(4, b.getIndexAttr(1));
      packed = tensor::InsertSliceOp::create(b, mean, packed, offsets, sizes,
                                             strides);
      level = mean;
      group = op.getBranching();
    }
    rewriter.replaceOp(op, packed);
    return success();
  }
};
} // namespace

void mlir::pisa::populatePyramidBuildToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<PyramidBuildToLinalg>(patterns.getContext());
}
