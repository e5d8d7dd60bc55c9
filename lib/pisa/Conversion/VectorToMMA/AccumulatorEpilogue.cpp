//===- AccumulatorEpilogue.cpp - Vector ops on mma.sync accumulators ------===//
//
// A warp tile product's result can be consumed in registers, where mma.sync
// leaves it, instead of through shared memory. The ops allowed on it are
// those of a row-wise reduction epilogue (e.g. a log-sum-exp per row):
//
//   tiles (R x C f32):  elementwise arith/math ops, with splat constants,
//                       vector.multi_reduction over dim 1 -> a row vector,
//                       vector.broadcast of a row vector (R x 1) -> tile
//   row vectors (R):    elementwise ops, vector.shape_cast R -> R x 1,
//                       vector.extract_strided_slice of 16-row pieces,
//                       vector.reduction -> a scalar (uniform on the warp)
//
// They are unrolled with the product to 16 x 8 tiles and 16-row pieces, then
// distributed over the accumulator layout: lane l holds, of each 16 x 8
// tile, rows l / 4 and l / 4 + 8 at columns 2 (l % 4) + {0, 1} (a
// vector<2x2xf32>), and of each 16-row piece the same two rows (a
// vector<2xf32>, equal on the four lanes of a quad). A row reduction
// combines a lane's two columns and then the quad (shuffles xor 1, 2); a
// reduction over rows combines a lane's two rows and then the eight quads
// (shuffles xor 4, 8, 16).
//
//===----------------------------------------------------------------------===//

#include "pisa/Conversion/VectorToMMA/VectorToMMA.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;

namespace {
constexpr int64_t kRows = 16, kCols = 8;

bool isElementwiseF32(Operation *op) {
  if (op->getNumResults() != 1 || op->getNumRegions() != 0 ||
      !OpTrait::hasElementwiseMappableTraits(op))
    return false;
  auto type = dyn_cast<VectorType>(op->getResult(0).getType());
  return type && type.getElementType().isF32() &&
         isa<arith::ArithDialect, math::MathDialect>(op->getDialect());
}

bool isRowReduction(vector::MultiDimReductionOp op) {
  return op.getSourceVectorType().getRank() == 2 &&
         op.getReductionDims() == ArrayRef<int64_t>{1};
}

bool isRowBroadcast(vector::BroadcastOp op) {
  auto source = dyn_cast<VectorType>(op.getSourceType());
  return source && source.getRank() == 2 && source.getDimSize(1) == 1;
}

/// The kinds a reduction may have here: those with an elementwise f32
/// combining op (`combine`).
bool isSupportedKind(vector::CombiningKind kind) {
  return kind == vector::CombiningKind::ADD ||
         kind == vector::CombiningKind::MAXIMUMF ||
         kind == vector::CombiningKind::MINIMUMF;
}

Value combine(ImplicitLocOpBuilder &b, vector::CombiningKind kind, Value x,
              Value y) {
  switch (kind) {
  case vector::CombiningKind::ADD:
    return arith::AddFOp::create(b, x, y);
  case vector::CombiningKind::MAXIMUMF:
    return arith::MaximumFOp::create(b, x, y);
  case vector::CombiningKind::MINIMUMF:
    return arith::MinimumFOp::create(b, x, y);
  default:
    llvm_unreachable("callers check isSupportedKind first");
  }
}

Value shuffleXor(ImplicitLocOpBuilder &b, Value v, int32_t mask) {
  Value offset = arith::ConstantIntOp::create(b, mask, 32);
  Value width = arith::ConstantIntOp::create(b, 32, 32);
  return gpu::ShuffleOp::create(b, v, offset, width, gpu::ShuffleMode::XOR)
      .getShuffleResult();
}

/// `v` combined over the lanes that differ in the bits of `masks`.
Value combineLanes(ImplicitLocOpBuilder &b, vector::CombiningKind kind, Value v,
                   ArrayRef<int32_t> masks) {
  for (int32_t mask : masks)
    v = combine(b, kind, v, shuffleXor(b, v, mask));
  return v;
}

/// A splat constant of `type`'s element value in the distributed `type`.
Value splatAs(ImplicitLocOpBuilder &b, Value value, VectorType type) {
  SplatElementsAttr splat;
  if (!matchPattern(value, m_Constant(&splat)))
    return {};
  return arith::ConstantOp::create(
      b, type, DenseElementsAttr::get(type, splat.getSplatValue<Attribute>()));
}
} // namespace

void mlir::pisa::markAccumulatorEpilogue(
    Value product,
    llvm::function_ref<void(Operation *, ArrayRef<int64_t>)> mark) {
  SmallVector<Value> work{product};
  DenseSet<Operation *> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      if (user->getNumResults() != 1)
        continue;
      auto type = dyn_cast<VectorType>(user->getResult(0).getType());
      if (isElementwiseF32(user) && type.getRank() == 2) {
        mark(user, {kRows, kCols});
      } else if (isElementwiseF32(user) && type.getRank() == 1) {
        mark(user, {kRows});
      } else if (auto red = dyn_cast<vector::MultiDimReductionOp>(user);
                 red && isRowReduction(red)) {
        mark(user, {kRows, kCols});
      } else if (auto cast = dyn_cast<vector::ShapeCastOp>(user);
                 cast && type.getRank() == 2 && type.getDimSize(1) == 1) {
        mark(user, {kRows, 1});
      } else if (auto bcast = dyn_cast<vector::BroadcastOp>(user);
                 bcast && isRowBroadcast(bcast)) {
        mark(user, {kRows, kCols});
      } else if (isa<vector::ExtractStridedSliceOp>(user)) {
        // In the slice so that it folds into the unrolled pieces.
        mark(user, {kRows});
      } else if (isa<vector::ReductionOp>(user)) {
        mark(user, {kRows});
        continue;
      } else {
        continue;
      }
      work.push_back(user->getResult(0));
    }
  }
}

namespace {
/// Rewrites the epilogue of one product, op by op in program order, onto
/// the accumulator layout: `tiles` maps a 16 x 8 tile to its lane's
/// vector<2x2xf32>, `rows` a 16-row piece to its vector<2xf32>.
class EpilogueDistributor {
public:
  EpilogueDistributor(RewriterBase &rewriter, DenseMap<Value, Value> &tiles)
      : rewriter(rewriter), tiles(tiles) {
    Type f32 = Float32Type::get(rewriter.getContext());
    tileType = VectorType::get({2, 2}, f32);
    rowType = VectorType::get({2}, f32);
  }

  LogicalResult run(Operation *root);

private:
  /// A row reduction's result before its quad shuffles: the lane's partial
  /// (vector<2xf32>), the kind, and the initial accumulator applied after
  /// the shuffles. Chained reductions (how unrolling splits a row) extend
  /// the partial, so a row costs two shuffles per fragment row, not per
  /// 16 x 8 tile.
  struct Pending {
    Value partial;
    vector::CombiningKind kind;
    Value init;
  };

  static bool isTile(Value v) {
    auto t = dyn_cast<VectorType>(v.getType());
    return t && t.getShape() == ArrayRef<int64_t>{kRows, kCols};
  }
  static bool isRow(Value v) {
    auto t = dyn_cast<VectorType>(v.getType());
    return t && (t.getShape() == ArrayRef<int64_t>{kRows} ||
                 t.getShape() == ArrayRef<int64_t>{kRows, 1});
  }
  bool usesDistributed(Operation *op) const {
    return llvm::any_of(op->getOperands(), [&](Value v) {
      return tiles.count(v) || rows.count(v) || pending.count(v);
    });
  }

  /// The distributed row of `v`, finishing a pending reduction (its quad
  /// shuffles, then its initial value); null if `v` has none.
  Value materialize(ImplicitLocOpBuilder &b, Value v);
  /// One op using a distributed value; fails with a diagnostic on `op`.
  LogicalResult distribute(ImplicitLocOpBuilder &b, Operation *op);
  LogicalResult elementwise(ImplicitLocOpBuilder &b, Operation *op);
  LogicalResult rowReduction(ImplicitLocOpBuilder &b,
                             vector::MultiDimReductionOp red);
  LogicalResult rowBroadcast(ImplicitLocOpBuilder &b,
                             vector::BroadcastOp bcast);
  LogicalResult reduction(ImplicitLocOpBuilder &b, vector::ReductionOp red);

  RewriterBase &rewriter;
  DenseMap<Value, Value> &tiles;
  DenseMap<Value, Value> rows;
  DenseMap<Value, Pending> pending;
  VectorType tileType, rowType;
};
} // namespace

Value EpilogueDistributor::materialize(ImplicitLocOpBuilder &b, Value v) {
  if (Value row = rows.lookup(v))
    return row;
  auto it = pending.find(v);
  if (it == pending.end())
    return {};
  Pending p = it->second;
  SmallVector<Value> perRow;
  for (int64_t i = 0; i < 2; ++i)
    perRow.push_back(combineLanes(
        b, p.kind,
        vector::ExtractOp::create(b, p.partial, ArrayRef<int64_t>{i}), {1, 2}));
  Value row = combine(
      b, p.kind, vector::FromElementsOp::create(b, rowType, perRow), p.init);
  rows[v] = row;
  return row;
}

LogicalResult EpilogueDistributor::elementwise(ImplicitLocOpBuilder &b,
                                               Operation *op) {
  Value res = op->getResult(0);
  bool tile = isTile(res);
  if (!tile && !isRow(res))
    return op->emitOpError("has no accumulator layout for this shape");
  VectorType type = tile ? tileType : rowType;
  SmallVector<Value> operands;
  for (Value v : op->getOperands()) {
    Value d = tile ? tiles.lookup(v) : materialize(b, v);
    if (!d)
      d = splatAs(b, v, type);
    if (!d)
      return op->emitOpError(
          "mixes an accumulator with a value of no known layout");
    operands.push_back(d);
  }
  OperationState state(op->getLoc(), op->getName(), operands, {type},
                       op->getAttrs());
  (tile ? tiles : rows)[res] = b.create(state)->getResult(0);
  return success();
}

LogicalResult
EpilogueDistributor::rowReduction(ImplicitLocOpBuilder &b,
                                  vector::MultiDimReductionOp red) {
  Value src = tiles.lookup(red.getSource());
  vector::CombiningKind kind = red.getKind();
  if (!src || !isRowReduction(red) || !isSupportedKind(kind))
    return red->emitOpError("is not a supported row reduction of an "
                            "accumulator");
  // The lane's two columns of each of its rows.
  SmallVector<Value> perRow;
  for (int64_t i = 0; i < 2; ++i) {
    Value pair = vector::ExtractOp::create(b, src, ArrayRef<int64_t>{i});
    perRow.push_back(combine(
        b, kind, vector::ExtractOp::create(b, pair, ArrayRef<int64_t>{0}),
        vector::ExtractOp::create(b, pair, ArrayRef<int64_t>{1})));
  }
  Value local = vector::FromElementsOp::create(b, rowType, perRow);
  auto chained = pending.find(red.getAcc());
  if (chained != pending.end() && chained->second.kind == kind) {
    Pending p = chained->second;
    pending[red.getResult()] = {combine(b, kind, p.partial, local), kind,
                                p.init};
  } else if (Value init = splatAs(b, red.getAcc(), rowType)) {
    pending[red.getResult()] = {local, kind, init};
  } else if (Value acc = materialize(b, red.getAcc())) {
    pending[red.getResult()] = {local, kind, acc};
  } else {
    return red->emitOpError("has an accumulator of no known layout");
  }
  return success();
}

LogicalResult EpilogueDistributor::rowBroadcast(ImplicitLocOpBuilder &b,
                                                vector::BroadcastOp bcast) {
  Value row = materialize(b, bcast.getSource());
  if (!row || !isRowBroadcast(bcast) || !isTile(bcast.getResult()))
    return bcast->emitOpError("is not a row broadcast to a 16 x 8 tile");
  // n-D shape casts do not lower: build the 2x2 fragment row by row.
  Value tile = arith::ConstantOp::create(b, tileType, b.getZeroAttr(tileType));
  for (int64_t i = 0; i < 2; ++i) {
    Value v = vector::ExtractOp::create(b, row, ArrayRef<int64_t>{i});
    tile =
        vector::InsertOp::create(b, vector::BroadcastOp::create(b, rowType, v),
                                 tile, ArrayRef<int64_t>{i});
  }
  tiles[bcast.getResult()] = tile;
  return success();
}

LogicalResult EpilogueDistributor::reduction(ImplicitLocOpBuilder &b,
                                             vector::ReductionOp red) {
  Value row = materialize(b, red.getVector());
  if (!row || red.getAcc() || !isSupportedKind(red.getKind()))
    return red->emitOpError("is not a reduction of a 16-row piece");
  Value v = combine(b, red.getKind(),
                    vector::ExtractOp::create(b, row, ArrayRef<int64_t>{0}),
                    vector::ExtractOp::create(b, row, ArrayRef<int64_t>{1}));
  rewriter.replaceAllUsesWith(red.getResult(),
                              combineLanes(b, red.getKind(), v, {4, 8, 16}));
  return success();
}

LogicalResult EpilogueDistributor::distribute(ImplicitLocOpBuilder &b,
                                              Operation *op) {
  if (isElementwiseF32(op))
    return elementwise(b, op);
  if (auto red = dyn_cast<vector::MultiDimReductionOp>(op))
    return rowReduction(b, red);
  if (auto cast = dyn_cast<vector::ShapeCastOp>(op)) {
    Value row = materialize(b, cast.getSource());
    if (!row || !isRow(cast.getResult()))
      return op->emitOpError("is not a 16-row piece cast to 16 x 1");
    rows[cast.getResult()] = row;
    return success();
  }
  if (auto bcast = dyn_cast<vector::BroadcastOp>(op))
    return rowBroadcast(b, bcast);
  if (auto red = dyn_cast<vector::ReductionOp>(op))
    return reduction(b, red);
  return op->emitOpError("uses an mma accumulator in a way that has "
                         "no register layout");
}

LogicalResult EpilogueDistributor::run(Operation *root) {
  SmallVector<Operation *> done;
  WalkResult walked = root->walk([&](Operation *op) {
    if (!usesDistributed(op))
      return WalkResult::advance();
    // Transfer writes and the products themselves are the caller's.
    if (isa<vector::TransferWriteOp, vector::ContractionOp>(op))
      return WalkResult::advance();
    ImplicitLocOpBuilder b(op->getLoc(), rewriter);
    rewriter.setInsertionPoint(op);
    if (failed(distribute(b, op)))
      return WalkResult::interrupt();
    done.push_back(op);
    return WalkResult::advance();
  });
  if (walked.wasInterrupted())
    return failure();
  for (Operation *op : llvm::reverse(done)) {
    if (!op->use_empty())
      return op->emitOpError("accumulator value still used after "
                             "distribution");
    rewriter.eraseOp(op);
  }
  return success();
}

LogicalResult mlir::pisa::distributeAccumulatorEpilogue(
    RewriterBase &rewriter, Operation *root, DenseMap<Value, Value> &tiles) {
  return EpilogueDistributor(rewriter, tiles).run(root);
}
