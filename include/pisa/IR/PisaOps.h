//===- PisaOps.h - PISA operations ------------------------------*- C++ -*-===//

#ifndef PISA_IR_PISAOPS_H
#define PISA_IR_PISAOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "pisa/IR/PisaAttrs.h"
#include "pisa/IR/PisaDialect.h"

namespace mlir::pisa {
/// Where the head and token dimensions of a 4-D operand sit: [B, H, T, X]
/// (head-major, the default) or [B, T, H, X] (`token_major`).
inline unsigned headDimIndex(bool tokenMajor) { return tokenMajor ? 2 : 1; }
inline unsigned tokenDimIndex(bool tokenMajor) { return tokenMajor ? 1 : 2; }

/// Whether `op` is a kernel-level op (pisa.kernel.*, destination-passing):
/// what --pisa-decompose-to-kernels writes, --pisa-configure-kernels
/// configures and --convert-pisa-to-gpu lowers.
inline bool isKernelLevelOp(Operation *op) {
  return isa_and_nonnull<PisaDialect>(op->getDialect()) &&
         isa<DestinationStyleOpInterface>(op);
}

/// The error of a user-level pisa op without a GPU lowering.
constexpr llvm::StringLiteral kNoGPULoweringError =
    "has no GPU lowering (the CPU pipeline, pisa-cpu-pipeline, lowers it)";
} // namespace mlir::pisa

#define GET_OP_CLASSES
#include "pisa/IR/PisaOps.h.inc"

#endif // PISA_IR_PISAOPS_H
