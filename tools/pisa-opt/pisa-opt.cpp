//===- pisa-opt.cpp - PISA pass driver ------------------------------------===//
//
// Like mlir-opt, restricted to the dialects and passes pisa uses.
//
//===----------------------------------------------------------------------===//

#include "pisa/InitAllDialects.h"
#include "pisa/InitAllPasses.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::pisa::registerAllPasses();
  mlir::DialectRegistry registry;
  mlir::pisa::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "PISA optimizer driver\n", registry));
}
