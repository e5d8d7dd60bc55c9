//===- Dialects.cpp - C API of the pisa dialect ---------------------------===//

#include "pisa-c/Dialects.h"

#include "pisa/IR/PisaDialect.h"
#include "pisa/InitAllDialects.h"
#include "pisa/InitAllPasses.h"
#include "pisa/Support/ParserLimits.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Pisa, pisa, mlir::pisa::PisaDialect)

bool pisaRegisterAllDialects(MlirDialectRegistry registry) {
  if (mlirDialectRegistryIsNull(registry))
    return false;
  mlir::pisa::registerAllDialects(*unwrap(registry));
  return true;
}

void pisaRegisterAllPasses(void) { mlir::pisa::registerAllPasses(); }

bool pisaCheckParseSafety(MlirStringRef text, intptr_t *line, intptr_t *column,
                          MlirStringCallback callback, void *userData) {
  std::optional<mlir::pisa::UnsafeInput> unsafe;
  if (!text.data && text.length != 0)
    unsafe = mlir::pisa::UnsafeInput{0, 0, 0,
                                     "the text is a null pointer "
                                     "with a non-zero length"};
  else if (text.length != 0)
    unsafe = mlir::pisa::findUnsafeInput(unwrap(text));
  if (!unsafe)
    return true;
  if (line)
    *line = static_cast<intptr_t>(unsafe->line);
  if (column)
    *column = static_cast<intptr_t>(unsafe->column);
  if (callback)
    callback(mlirStringRefCreate(unsafe->reason.data(), unsafe->reason.size()),
             userData);
  return false;
}
