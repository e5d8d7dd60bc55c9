//===- PisaPlugin.cpp - pisa as a plugin of the stock mlir-opt ------------===//
//
// One shared library that is both a dialect plugin and a pass plugin of any
// mlir-opt linked against the same libMLIR.so (Debian's mlir-opt-22):
//
//   mlir-opt-22 --load-dialect-plugin=build/lib/PisaPlugin.so \
//               --load-pass-plugin=build/lib/PisaPlugin.so \
//               --pisa-select-schedule in.mlir
//
// The dialect callback registers pisa and what its lowerings create; the
// pass callback registers pisa's own passes and pipelines only (the host
// tool already has upstream's).
//
//===----------------------------------------------------------------------===//

#include "pisa/Conversion/Passes.h"
#include "pisa/InitAllDialects.h"
#include "pisa/Pipelines/Pipelines.h"
#include "pisa/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Compiler.h"

extern "C" LLVM_ATTRIBUTE_WEAK mlir::DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "Pisa", LLVM_VERSION_STRING,
          [](mlir::DialectRegistry *registry) {
            mlir::pisa::registerAllDialects(*registry);
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK mlir::PassPluginLibraryInfo
mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "PisaPasses", LLVM_VERSION_STRING, []() {
            mlir::pisa::registerPisaPasses();
            mlir::pisa::registerPisaConversionPasses();
            mlir::pisa::registerPisaPipelines();
          }};
}
