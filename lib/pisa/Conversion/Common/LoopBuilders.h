//===- LoopBuilders.h - Terse scf/arith construction helpers ----*- C++ -*-===//
//
// The selection lowerings build deep scf nests with iter_args; these helpers
// keep that code about the algorithm rather than about builder plumbing.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_COMMON_LOOPBUILDERS_H
#define PISA_LIB_CONVERSION_COMMON_LOOPBUILDERS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::pisa::detail {

using LoopBody = llvm::function_ref<SmallVector<Value>(
    ImplicitLocOpBuilder &, Value iv, ValueRange iterArgs)>;
using Branch = llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder &)>;

/// scf.for %iv = lb to ub step 1 with `init` iter_args; `body` returns the
/// values to yield. Returns the loop results.
SmallVector<Value> buildLoop(ImplicitLocOpBuilder &b, Value lb, Value ub,
                             ValueRange init, LoopBody body);
/// The same with step `step`.
SmallVector<Value> buildLoop(ImplicitLocOpBuilder &b, Value lb, Value ub,
                             Value step, ValueRange init, LoopBody body);

/// scf.if with results; each branch returns the values it yields.
SmallVector<Value> buildIf(ImplicitLocOpBuilder &b, Value cond, TypeRange types,
                           Branch thenBranch, Branch elseBranch);

/// scf.if without results: runs `then` when `cond` holds.
void buildIfThen(ImplicitLocOpBuilder &b, Value cond,
                 llvm::function_ref<void(ImplicitLocOpBuilder &)> then);

Value indexConst(ImplicitLocOpBuilder &b, int64_t value);
Value f32Const(ImplicitLocOpBuilder &b, float value);

/// arith.cmpi `pred` on two integers or indices.
Value cmp(ImplicitLocOpBuilder &b, arith::CmpIPredicate pred, Value lhs,
          Value rhs);
/// Casts between index and i32.
Value toIndex(ImplicitLocOpBuilder &b, Value i32);
Value toI32(ImplicitLocOpBuilder &b, Value index);

/// Reads an i32 element of `tensor` at `indices` as an index.
Value extractIndex(ImplicitLocOpBuilder &b, Value tensor, ValueRange indices);
/// Writes index `value` as i32 into `tensor` at `indices`.
Value insertIndex(ImplicitLocOpBuilder &b, Value value, Value tensor,
                  ValueRange indices);
/// Reads a float element of a tensor or memref and widens it to f32.
Value extractF32(ImplicitLocOpBuilder &b, Value source, ValueRange indices);

/// Size of dimension `dim` of a ranked tensor or memref: a constant when
/// static, else tensor.dim / memref.dim.
Value dimOf(ImplicitLocOpBuilder &b, Value tensor, int64_t dim);
/// tensor.empty of `type`, its dynamic sizes taken from `sizes` (one entry
/// per dimension; static dimensions' entries are ignored).
Value emptyLike(ImplicitLocOpBuilder &b, RankedTensorType type,
                ArrayRef<Value> sizes);

/// A 4-D tensor with dimensions 1 and 2 swapped ([B, T, H, X] <-> [B, H, T,
/// X]), or a 3-D one ([B, T, H] <-> [B, H, T]): a linalg.transpose into a
/// fresh tensor.
Value swapHeadsAndTokens(ImplicitLocOpBuilder &b, Value tensor);
/// The type swapHeadsAndTokens gives a tensor of `type`.
RankedTensorType swapHeadsAndTokens(RankedTensorType type);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_COMMON_LOOPBUILDERS_H
