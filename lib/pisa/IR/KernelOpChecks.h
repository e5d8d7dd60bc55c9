//===- KernelOpChecks.h - Checks the kernel-op verifiers share --*- C++ -*-===//
//
// The checks every kernel-level op's verifier is built from (defined in
// PisaKernelOps.cpp, used there and in PisaGradKernelOps.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_IR_KERNELOPCHECKS_H
#define PISA_LIB_IR_KERNELOPCHECKS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::pisa::detail {

/// The shape of a shaped value.
ArrayRef<int64_t> shapeOf(Value v);

/// [B, H, T, X] of a token-indexed operand (queries, keys, selection).
SmallVector<int64_t, 4> tokenShapeOf(Value v, bool tokenMajor);

/// The kernels are tiled by the operands' heads and features, which must
/// be static (a hand-written op with a dynamic d crashed the lowering):
/// Tokens: [B, H, T, X] dims 1 and 3 (token-major 2 and 3), packed
///   [T, H, X] 1 and 2 (queries, keys, values, selection, output);
/// PerKvHead: [B, Hkv, Nq, X] 1 and 3, [B, Hkv, Nq] 1 (contenders, counts,
///   scores);
/// Rows: the last dim (a pyramid, fragment planes);
/// PagePool: [P, S, Hkv, d] 1, 2 and 3.
enum class Tiled { Tokens, PerKvHead, Rows, PagePool };
struct TiledOperand {
  StringRef name;
  Value value;
  Tiled kind;
  bool tokenMajor = false;
};
LogicalResult checkTiledDims(Operation *op, ArrayRef<TiledOperand> operands);

/// One form (all tensors or all buffers; the interface checks the results
/// of the tensor form) and one batch size B (dim 0) across the operands of
/// rank >= 2 (B = 1 with cu_seqlens: a packed batch) but `pagePool`, a
/// paged cache's keys, whose dim 0 counts pages; and the attributes the
/// contract bounds (C, g, K, the scale, q_tile, the kernel config).
LogicalResult verifyKernelOp(Operation *op, bool packed = false,
                             Value pagePool = Value());

/// An attention op given cu_seqlens (both or neither) reads a packed
/// batch as a token-major batch of one (`batch`: the queries' B).
LogicalResult checkPackedBatch(Operation *op, Value cuQueries, Value cuKeys,
                               bool tokenMajor, int64_t batch);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_IR_KERNELOPCHECKS_H
