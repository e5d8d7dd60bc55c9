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
} // namespace mlir::pisa

#define GET_OP_CLASSES
#include "pisa/IR/PisaOps.h.inc"

#endif // PISA_IR_PISAOPS_H
