//===- pisa-opt.cpp - PISA pass driver ------------------------------------===//
//
// Like mlir-opt, restricted to the dialects and passes pisa uses.
//
//===----------------------------------------------------------------------===//

#include "pisa/InitAllDialects.h"
#include "pisa/InitAllPasses.h"
#include "pisa/Version.h"

#include "llvm/Support/CommandLine.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  llvm::cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << "pisa " PISA_VERSION_STRING "\n";
  });
  // LLVM's own flags (backend tuning, registered when libLLVM loads) move
  // to --help-hidden; what MlirOptMain registers next stays in --help.
  for (auto &option : llvm::cl::getRegisteredOptions())
    if (option.first != "help" && option.first != "version")
      option.second->setHiddenFlag(llvm::cl::Hidden);
  mlir::pisa::registerAllPasses();
  mlir::DialectRegistry registry;
  mlir::pisa::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "PISA optimizer driver\n", registry));
}
