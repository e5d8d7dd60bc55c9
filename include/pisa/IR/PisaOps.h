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

#define GET_OP_CLASSES
#include "pisa/IR/PisaOps.h.inc"

#endif // PISA_IR_PISAOPS_H
