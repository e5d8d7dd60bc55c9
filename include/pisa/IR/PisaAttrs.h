//===- PisaAttrs.h - PISA attributes ----------------------------*- C++ -*-===//

#ifndef PISA_IR_PISAATTRS_H
#define PISA_IR_PISAATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "pisa/IR/PisaEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "pisa/IR/PisaAttrs.h.inc"

#endif // PISA_IR_PISAATTRS_H
