//===- InitAllDialects.h - Dialects and interfaces pisa uses ----*- C++ -*-===//
//
// Registers the pisa dialect and exactly the upstream dialects, interface
// models and LLVM IR translations that pisa's pipelines produce or consume.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_INITALLDIALECTS_H
#define PISA_INITALLDIALECTS_H

#include "mlir/IR/DialectRegistry.h"

namespace mlir::pisa {

/// Dialects plus the bufferization, to-LLVM and translation interfaces the
/// CPU and GPU pipelines need.
void registerAllDialects(DialectRegistry &registry);

} // namespace mlir::pisa

#endif // PISA_INITALLDIALECTS_H
