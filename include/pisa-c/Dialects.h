/*===- pisa-c/Dialects.h - C API of the pisa dialect --------------*- C -*-===*\
|*                                                                            *|
|* MLIR's C API convention: mlirGetDialectHandle__pisa__() for the dialect,   *|
|* plus registration of pisa's passes and pipelines and of the dialects its   *|
|* lowerings create. Link PisaCAPI (build/lib/libPisaCAPI.a) with libMLIR.so. *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef PISA_C_DIALECTS_H
#define PISA_C_DIALECTS_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(Pisa, pisa);

/// Registers into `registry` the pisa dialect and every dialect and
/// interface that pisa's passes and pipelines create (arith, tensor, linalg,
/// gpu, nvvm, the LLVM translations, ...). Needed before running a pipeline.
/// Returns false and registers nothing when `registry` is null
/// (mlirDialectRegistryIsNull).
MLIR_CAPI_EXPORTED bool pisaRegisterAllDialects(MlirDialectRegistry registry);

/// Registers pisa's passes (--pisa-select-schedule, --convert-pisa-to-linalg,
/// --convert-pisa-to-gpu, ...) and pipelines (pisa-cpu-pipeline,
/// pisa-lower-to-nvvm-pipeline), and the upstream passes they are built
/// from, with the global registry, so that mlirParsePassPipeline finds them.
MLIR_CAPI_EXPORTED void pisaRegisterAllPasses(void);

/// Screens MLIR text before mlirModuleCreateParse for the inputs on which
/// MLIR 22's own parser crashes instead of reporting an error (a malformed
/// `permutation =` / `dimensions =` list of linalg.transpose, broadcast or
/// reduce; a result number like %x#99999999999; nesting of (), [], {} or <>
/// deeper than 256 levels, which overflows the parser's stack), as pisa-opt
/// does. Returns true when the text is safe to parse; else false, with the
/// 1-based `line` and `column` (either may be NULL) and the reason passed to
/// `callback` (may be NULL). A text with a NULL `data` and a non-zero
/// `length` is refused at line 0, column 0; with length 0 it is empty, and
/// safe.
MLIR_CAPI_EXPORTED bool pisaCheckParseSafety(MlirStringRef text, intptr_t *line,
                                             intptr_t *column,
                                             MlirStringCallback callback,
                                             void *userData);

#ifdef __cplusplus
}
#endif

#endif /* PISA_C_DIALECTS_H */
