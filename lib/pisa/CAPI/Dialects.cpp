//===- Dialects.cpp - C API of the pisa dialect ---------------------------===//

#include "pisa-c/Dialects.h"

#include "pisa/IR/PisaDialect.h"
#include "pisa/InitAllDialects.h"
#include "pisa/InitAllPasses.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Pisa, pisa, mlir::pisa::PisaDialect)

void pisaRegisterAllDialects(MlirDialectRegistry registry) {
  mlir::pisa::registerAllDialects(*unwrap(registry));
}

void pisaRegisterAllPasses(void) { mlir::pisa::registerAllPasses(); }
