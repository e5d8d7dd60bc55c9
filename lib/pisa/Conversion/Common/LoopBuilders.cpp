//===- LoopBuilders.cpp - Terse scf/arith construction helpers ------------===//

#include "LoopBuilders.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::pisa::detail;

SmallVector<Value> mlir::pisa::detail::buildLoop(ImplicitLocOpBuilder &b,
                                                 Value lb, Value ub,
                                                 ValueRange init,
                                                 LoopBody body) {
  return buildLoop(b, lb, ub, indexConst(b, 1), init, body);
}

SmallVector<Value> mlir::pisa::detail::buildLoop(ImplicitLocOpBuilder &b,
                                                 Value lb, Value ub, Value step,
                                                 ValueRange init,
                                                 LoopBody body) {
  auto loop = scf::ForOp::create(
      b, lb, ub, step, init,
      [&](OpBuilder &nested, Location loc, Value iv, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, nested);
        SmallVector<Value> yielded = body(ib, iv, args);
        scf::YieldOp::create(ib, yielded);
      });
  return SmallVector<Value>(loop.getResults());
}

SmallVector<Value> mlir::pisa::detail::buildIf(ImplicitLocOpBuilder &b,
                                               Value cond, TypeRange types,
                                               Branch thenBranch,
                                               Branch elseBranch) {
  // Empty blocks, no default yields: erasing those behind a conversion's
  // back would leave its driver a freed op to visit.
  auto ifOp = scf::IfOp::create(b, types, cond, /*addThenBlock=*/true,
                                /*addElseBlock=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    scf::YieldOp::create(b, thenBranch(b));
    b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(b, elseBranch(b));
  }
  return SmallVector<Value>(ifOp.getResults());
}

void mlir::pisa::detail::buildIfThen(
    ImplicitLocOpBuilder &b, Value cond,
    llvm::function_ref<void(ImplicitLocOpBuilder &)> then) {
  auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  then(b);
}

Value mlir::pisa::detail::indexConst(ImplicitLocOpBuilder &b, int64_t value) {
  return arith::ConstantIndexOp::create(b, value);
}

Value mlir::pisa::detail::cmp(ImplicitLocOpBuilder &b,
                              arith::CmpIPredicate pred, Value lhs, Value rhs) {
  return arith::CmpIOp::create(b, pred, lhs, rhs);
}

Value mlir::pisa::detail::toIndex(ImplicitLocOpBuilder &b, Value i32) {
  return arith::IndexCastOp::create(b, b.getIndexType(), i32);
}

Value mlir::pisa::detail::toI32(ImplicitLocOpBuilder &b, Value index) {
  return arith::IndexCastOp::create(b, b.getI32Type(), index);
}

Value mlir::pisa::detail::f32Const(ImplicitLocOpBuilder &b, float value) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(value));
}

Value mlir::pisa::detail::extractIndex(ImplicitLocOpBuilder &b, Value tensor,
                                       ValueRange indices) {
  Value v = tensor::ExtractOp::create(b, tensor, indices);
  return arith::IndexCastOp::create(b, b.getIndexType(), v);
}

Value mlir::pisa::detail::insertIndex(ImplicitLocOpBuilder &b, Value value,
                                      Value tensor, ValueRange indices) {
  Value v = arith::IndexCastOp::create(b, b.getI32Type(), value);
  return tensor::InsertOp::create(b, v, tensor, indices);
}

Value mlir::pisa::detail::extractF32(ImplicitLocOpBuilder &b, Value source,
                                     ValueRange indices) {
  Value v = isa<MemRefType>(source.getType())
                ? memref::LoadOp::create(b, source, indices).getResult()
                : tensor::ExtractOp::create(b, source, indices).getResult();
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(b, b.getF32Type(), v);
}

Value mlir::pisa::detail::dimOf(ImplicitLocOpBuilder &b, Value tensor,
                                int64_t dim) {
  int64_t size = cast<ShapedType>(tensor.getType()).getDimSize(dim);
  if (!ShapedType::isDynamic(size))
    return indexConst(b, size);
  if (isa<MemRefType>(tensor.getType()))
    return memref::DimOp::create(b, tensor, dim);
  return tensor::DimOp::create(b, tensor, dim);
}

Value mlir::pisa::detail::emptyLike(ImplicitLocOpBuilder &b,
                                    RankedTensorType type,
                                    ArrayRef<Value> sizes) {
  SmallVector<Value> dynamic;
  for (auto [i, size] : llvm::enumerate(type.getShape()))
    if (ShapedType::isDynamic(size))
      dynamic.push_back(sizes[i]);
  return tensor::EmptyOp::create(b, type.getShape(), type.getElementType(),
                                 dynamic);
}

/// [B, T, H, X] <-> [B, H, T, X], or [B, T, H] <-> [B, H, T].
static SmallVector<int64_t> headTokenPermutation(int64_t rank) {
  SmallVector<int64_t> perm{0, 2, 1};
  if (rank == 4)
    perm.push_back(3);
  return perm;
}

RankedTensorType mlir::pisa::detail::swapHeadsAndTokens(RankedTensorType type) {
  SmallVector<int64_t> shape;
  for (int64_t p : headTokenPermutation(type.getRank()))
    shape.push_back(type.getDimSize(p));
  return RankedTensorType::get(shape, type.getElementType());
}

Value mlir::pisa::detail::swapHeadsAndTokens(ImplicitLocOpBuilder &b,
                                             Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  SmallVector<int64_t> perm = headTokenPermutation(type.getRank());
  SmallVector<Value> sizes;
  for (int64_t p : perm)
    sizes.push_back(dimOf(b, tensor, p));
  Value init = emptyLike(b, swapHeadsAndTokens(type), sizes);
  return linalg::TransposeOp::create(b, tensor, init, perm).getResult()[0];
}
