//===- PyramidBuildToLinalg.cpp - pyramid_build to structured ops ---------===//
//
// Each level is one structured reduction: zero-pad the level below to a
// whole number of groups, view it as [B, H, M, group, d], sum over the group
// with linalg.reduce (widening to f32), then divide every node by the number
// of children it really has (the last group may be partial). The levels are
// inserted into the packed [B, H, P, d] result at their PyramidLayout rows.
//
// With a dynamic B or N the number of levels is only known at run time: the
// layout comes from LayoutTables and the means from scf loops (leaves from
// the keys, then each upper level from the rows below it), summing in the
// same order as the structured form, so both give the same bits.
//
//===----------------------------------------------------------------------===//

#include "../Common/LayoutTables.h"
#include "../Common/LoopBuilders.h"

#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/Conversion/PisaToLinalg/PisaToLinalg.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Utils/Utils.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

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
  Value sum = linalg::ReduceOp::create(
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

/// Nodes [firstNode, endNode) of one level for batch element `bi`, every
/// head and feature: node i is the mean of the min(group, sourceRows - i *
/// group) rows of `source` (null: the pyramid `into` itself, for upper
/// levels) from sourceBase + i * group, summed in f32 in row order (the
/// order of the structured form, so both give the same bits), stored at
/// row destBase + i of `into`. Returns the updated `into`.
static Value meanRows(ImplicitLocOpBuilder &b, Value into, Value source,
                      Value bi, int64_t heads, int64_t d, Value firstNode,
                      Value endNode, Value group, Value sourceBase,
                      Value sourceRows, Value destBase) {
  Value zero = indexConst(b, 0);
  return buildLoop(
      b, zero, indexConst(b, heads), {into},
      [&](ImplicitLocOpBuilder &b1, Value h, ValueRange a1) {
        return buildLoop(
            b1, firstNode, endNode, a1,
            [&](ImplicitLocOpBuilder &b2, Value i, ValueRange a2) {
              Value first = arith::MulIOp::create(b2, i, group);
              Value count = arith::MinUIOp::create(
                  b2, group, arith::SubIOp::create(b2, sourceRows, first));
              Value countF = arith::UIToFPOp::create(
                  b2, b2.getF32Type(),
                  arith::IndexCastUIOp::create(b2, b2.getI64Type(), count));
              Value row = arith::AddIOp::create(b2, destBase, i);
              Value base = arith::AddIOp::create(b2, sourceBase, first);
              return buildLoop(
                  b2, zero, indexConst(b2, d), a2,
                  [&](ImplicitLocOpBuilder &b3, Value e, ValueRange a3) {
                    Value from = source ? source : a3[0];
                    Value sum = buildLoop(
                        b3, zero, count, {f32Const(b3, 0.0f)},
                        [&](ImplicitLocOpBuilder &b4, Value c, ValueRange acc) {
                          Value x = extractF32(
                              b4, from,
                              {bi, h, arith::AddIOp::create(b4, base, c), e});
                          return SmallVector<Value>{
                              arith::AddFOp::create(b4, x, acc[0])};
                        })[0];
                    Value mean = arith::DivFOp::create(b3, sum, countF);
                    return SmallVector<Value>{tensor::InsertOp::create(
                        b3, mean, a3[0], ValueRange{bi, h, row, e})};
                  });
            });
      })[0];
}

/// Recomputes, for batch element `bi`, the leaves [firstLeaf, M_1) of a
/// pyramid of `numKeys` keys and, level by level up to its root, every
/// ancestor of those leaves, into the rows of `into` whose level offsets
/// are `rowOffsets` (the layout of `numKeys` itself, or of a larger
/// capacity for a cache). `sizes` are the level sizes for numKeys.
static Value updatePyramid(ImplicitLocOpBuilder &b, Value into, Value keys,
                           Value bi, int64_t heads, int64_t d,
                           int64_t blockSize, int64_t fan, Value numKeys,
                           Value firstLeaf, const LayoutTables &sizes,
                           Value rowOffsets) {
  Value zero = indexConst(b, 0), one = indexConst(b, 1);
  Value cFan = indexConst(b, fan);
  into = meanRows(b, into, keys, bi, heads, d, firstLeaf, sizes.numLeaves,
                  indexConst(b, blockSize), zero, numKeys,
                  tensor::ExtractOp::create(b, rowOffsets, one));
  auto updated = buildLoop(
      b, indexConst(b, 2), arith::AddIOp::create(b, sizes.numLevels, one),
      {into, firstLeaf}, [&](ImplicitLocOpBuilder &lb, Value l, ValueRange st) {
        Value below = arith::SubIOp::create(lb, l, one);
        auto entry = [&](Value table, Value level) -> Value {
          return tensor::ExtractOp::create(lb, table, level);
        };
        Value first = arith::DivUIOp::create(lb, st[1], cFan);
        return SmallVector<Value>{
            meanRows(lb, st[0], Value(), bi, heads, d, first,
                     entry(sizes.sizes, l), cFan, entry(rowOffsets, below),
                     entry(sizes.sizes, below), entry(rowOffsets, l)),
            first};
      });
  return updated[0];
}

/// The pyramid of keys [B, H, N, d] with dynamic B or N: every node of the
/// run-time layout, from scf loops.
static Value buildDynamicPyramid(ImplicitLocOpBuilder &b, PyramidBuildOp op) {
  Value keys = op.getKeys();
  RankedTensorType keysType = op.getKeys().getType();
  RankedTensorType resultType = op.getPyramid().getType();
  const int64_t heads = keysType.getDimSize(1), d = keysType.getDimSize(3);
  Value zero = indexConst(b, 0);
  Value batch = dimOf(b, keys, 0), numKeys = dimOf(b, keys, 2);
  LayoutTables layout =
      buildLayoutTables(b, numKeys, op.getBlockSize(), op.getBranching());
  SmallVector<Value> dynamic;
  if (resultType.isDynamicDim(0))
    dynamic.push_back(batch);
  if (resultType.isDynamicDim(2))
    dynamic.push_back(layout.totalRows);
  Value packed = tensor::EmptyOp::create(b, resultType.getShape(),
                                         b.getF32Type(), dynamic);
  return buildLoop(b, zero, batch, {packed},
                   [&](ImplicitLocOpBuilder &lb, Value bi, ValueRange st) {
                     return SmallVector<Value>{
                         updatePyramid(lb, st[0], keys, bi, heads, d,
                                       op.getBlockSize(), op.getBranching(),
                                       numKeys, zero, layout, layout.offsets)};
                   })[0];
}

/// pyramid_append: per sequence, the leaves from from[b] / C on and their
/// ancestors, for a pyramid of to[b] keys, in the capacity layout.
static Value buildAppend(ImplicitLocOpBuilder &b, PyramidAppendOp op) {
  Value keys = op.getKeys();
  RankedTensorType keysType = op.getKeys().getType();
  const int64_t heads = keysType.getDimSize(1), d = keysType.getDimSize(3);
  const int64_t blockSize = op.getBlockSize(), fan = op.getBranching();
  Value zero = indexConst(b, 0);
  Value batch = dimOf(b, keys, 0), capacity = dimOf(b, keys, 2);
  LayoutTables cache = buildLayoutTables(b, capacity, blockSize, fan);
  auto length = [&](ImplicitLocOpBuilder &lb, Value tensor, Value bi) {
    return tensor::ExtractOp::create(lb, tensor, bi).getResult();
  };
  return buildLoop(
      b, zero, batch, {op.getPyramid()},
      [&](ImplicitLocOpBuilder &lb, Value bi, ValueRange st) {
        Value from = length(lb, op.getFrom(), bi),
              to = length(lb, op.getTo(), bi);
        Value zero32 = arith::ConstantIntOp::create(lb, 0, 32);
        Value valid = arith::AndIOp::create(
            lb,
            arith::AndIOp::create(
                lb,
                arith::CmpIOp::create(lb, arith::CmpIPredicate::sle, zero32,
                                      from),
                arith::CmpIOp::create(lb, arith::CmpIPredicate::slt, from, to)),
            cmp(lb, arith::CmpIPredicate::ule, toIndex(lb, to), capacity));
        return buildIf(
            lb, valid, {st[0].getType()},
            [&](ImplicitLocOpBuilder &tb) {
              Value n = toIndex(tb, to);
              LayoutTables sizes = buildLayoutTables(tb, n, blockSize, fan);
              Value firstLeaf = arith::DivUIOp::create(
                  tb, toIndex(tb, from), indexConst(tb, blockSize));
              return SmallVector<Value>{
                  updatePyramid(tb, st[0], keys, bi, heads, d, blockSize, fan,
                                n, firstLeaf, sizes, cache.offsets)};
            },
            [&](ImplicitLocOpBuilder &) { return SmallVector<Value>{st[0]}; });
      })[0];
}

namespace {
struct PyramidBuildToLinalg : OpRewritePattern<PyramidBuildOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PyramidBuildOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getTokenMajor())
      return rewriter.notifyMatchFailure(op, "token-major: transposed first");
    RankedTensorType keysType = op.getKeys().getType();
    RankedTensorType resultType = op.getPyramid().getType();
    if (!keysType.hasStaticShape() || !resultType.hasStaticShape()) {
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      rewriter.replaceOp(op, buildDynamicPyramid(b, op));
      return success();
    }
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

namespace {
struct PyramidAppendToLoops : OpRewritePattern<PyramidAppendOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PyramidAppendOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getBlockTable())
      return rewriter.notifyMatchFailure(op, "paged: DecodeToLoops");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    rewriter.replaceOp(op, buildAppend(b, op));
    return success();
  }
};
} // namespace

void mlir::pisa::populatePyramidBuildToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<PyramidBuildToLinalg, PyramidAppendToLoops>(
      patterns.getContext());
}
