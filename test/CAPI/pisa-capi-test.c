/*===- pisa-capi-test.c - The pisa dialect through MLIR's C API -----------===*\
|*                                                                            *|
|* Written in C: creates a context, loads pisa through its dialect handle,    *|
|* parses a program, runs --pisa-select-schedule through the C pass manager   *|
|* and prints the result (checked by FileCheck in test/CAPI/capi.test).       *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "pisa-c/Dialects.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#include <stdio.h>
#include <stdlib.h>

static void printToStdout(MlirStringRef text, void *unused) {
  (void)unused;
  fwrite(text.data, 1, text.length, stdout);
}

static void printError(MlirStringRef text, void *unused) {
  (void)unused;
  fwrite(text.data, 1, text.length, stderr);
}

static const char *kProgram =
    "func.func @select(%q: tensor<1x16x4096x128xbf16>,\n"
    "                  %k: tensor<1x1x4096x128xbf16>) -> tensor<1x1x4096x8xi32> {\n"
    "  %off = arith.constant 0 : index\n"
    "  %p = pisa.pyramid_build %k block_size = 64 branching = 2\n"
    "      : tensor<1x1x4096x128xbf16> -> tensor<1x1x127x128xf32>\n"
    "  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2\n"
    "      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>,\n"
    "        tensor<1x1x127x128xf32> -> tensor<1x1x4096x8xi32>\n"
    "  return %s : tensor<1x1x4096x8xi32>\n"
    "}\n";

int main(void) {
  /* Null arguments: refused, documented, never a crash. */
  MlirDialectRegistry none = {NULL};
  printf("null registry registered: %d\n", (int)pisaRegisterAllDialects(none));
  MlirStringRef nullText = {NULL, 5};
  intptr_t nline = -1, ncolumn = -1;
  printf("null text safe: %d at %d:%d\n",
         (int)pisaCheckParseSafety(nullText, &nline, &ncolumn, NULL, NULL),
         (int)nline, (int)ncolumn);
  MlirStringRef emptyText = {NULL, 0};
  printf("empty text safe: %d\n",
         (int)pisaCheckParseSafety(emptyText, NULL, NULL, NULL, NULL));

  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  if (!pisaRegisterAllDialects(registry)) {
    fprintf(stderr, "registration refused a registry\n");
    return 1;
  }
  MlirContext ctx = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);

  /* The dialect handle alone is enough to load pisa. */
  MlirDialect pisa = mlirContextGetOrLoadDialect(
      ctx, mlirDialectHandleGetNamespace(mlirGetDialectHandle__pisa__()));
  if (mlirDialectIsNull(pisa)) {
    fprintf(stderr, "pisa dialect not loaded\n");
    return 1;
  }
  MlirStringRef ns = mlirDialectGetNamespace(pisa);
  printf("loaded dialect: %.*s\n", (int)ns.length, ns.data);

  /* Text MLIR 22's parser would crash on is refused before parsing. */
  intptr_t line = 0, column = 0;
  if (!pisaCheckParseSafety(mlirStringRefCreateFromCString(kProgram), &line,
                            &column, NULL, NULL)) {
    fprintf(stderr, "the selection was refused\n");
    return 1;
  }
  const char *unsafe =
      "func.func @t(%x: tensor<2x3xf32>, %y: tensor<3x2xf32>) {\n"
      "  %t = linalg.transpose ins(%x : tensor<2x3xf32>)\n"
      "      outs(%y : tensor<3x2xf32>) permutation = [1, x]\n"
      "  return\n"
      "}\n";
  if (pisaCheckParseSafety(mlirStringRefCreateFromCString(unsafe), &line,
                           &column, printToStdout, NULL)) {
    fprintf(stderr, "the malformed permutation was not refused\n");
    return 1;
  }
  printf("\nrefused at %d:%d\n", (int)line, (int)column);

  /* 20,000 nested tuple< would overflow the parser's stack. */
  static char deep[20 * 1000 * 7 + 64];
  size_t at = (size_t)sprintf(deep, "func.func private @f(%%a: ");
  for (int i = 0; i < 20000; ++i)
    at += (size_t)sprintf(deep + at, "tuple<");
  if (pisaCheckParseSafety(mlirStringRefCreate(deep, at), &line, &column,
                           printToStdout, NULL)) {
    fprintf(stderr, "the deep nesting was not refused\n");
    return 1;
  }
  printf("\nrefused at %d:%d\n", (int)line, (int)column);

  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kProgram));
  if (mlirModuleIsNull(module)) {
    fprintf(stderr, "parse failed\n");
    return 1;
  }

  pisaRegisterAllPasses();
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  MlirLogicalResult parsed = mlirParsePassPipeline(
      opm,
      mlirStringRefCreateFromCString(
          "builtin.module(pisa-select-schedule{policy=refined})"),
      printError, NULL);
  if (mlirLogicalResultIsFailure(parsed)) {
    fprintf(stderr, "\npipeline parse failed\n");
    return 1;
  }
  MlirLogicalResult ran =
      mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module));
  if (mlirLogicalResultIsFailure(ran)) {
    fprintf(stderr, "pass failed\n");
    return 1;
  }
  mlirOperationPrint(mlirModuleGetOperation(module), printToStdout, NULL);
  printf("\n");

  /* The scheduled ops become kernel-level ops through the models
   * pisaRegisterAllDialects attached (KernelLoweringOpInterface), each with
   * its #pisa.kernel_config. */
  MlirPassManager kernels = mlirPassManagerCreate(ctx);
  parsed = mlirParsePassPipeline(
      mlirPassManagerGetAsOpPassManager(kernels),
      mlirStringRefCreateFromCString(
          "builtin.module(pisa-decompose-to-kernels,"
          "pisa-configure-kernels{chip=sm_90})"),
      printError, NULL);
  if (mlirLogicalResultIsFailure(parsed) ||
      mlirLogicalResultIsFailure(
          mlirPassManagerRunOnOp(kernels, mlirModuleGetOperation(module)))) {
    fprintf(stderr, "decomposition failed\n");
    return 1;
  }
  mlirOperationPrint(mlirModuleGetOperation(module), printToStdout, NULL);
  printf("\n");
  mlirPassManagerDestroy(kernels);

  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
  return 0;
}
