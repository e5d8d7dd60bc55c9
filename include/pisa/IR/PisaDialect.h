//===- PisaDialect.h - PISA dialect -----------------------------*- C++ -*-===//

#ifndef PISA_IR_PISADIALECT_H
#define PISA_IR_PISADIALECT_H

#include "mlir/IR/Dialect.h"

#include "pisa/IR/PisaOpsDialect.h.inc"

#endif // PISA_IR_PISADIALECT_H
