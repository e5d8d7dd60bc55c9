//===- pisa-opt.cpp - PISA pass driver ------------------------------------===//
//
// Like mlir-opt, restricted to the dialects and passes pisa uses. The input
// is read here first so that text MLIR 22's parser would crash on is refused
// with one line (pisa/Support/ParserLimits.h); the rest is MlirOptMain. The
// output is written as pisa/Support/OutputFiles.h describes.
//
//===----------------------------------------------------------------------===//

#include "pisa/InitAllDialects.h"
#include "pisa/InitAllPasses.h"
#include "pisa/Support/InputFiles.h"
#include "pisa/Support/OutputFiles.h"
#include "pisa/Support/ParserLimits.h"
#include "pisa/Version.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include <string>

using namespace mlir;

/// Runs MlirOptMain on `inputFilename` unless its text is unsafe to parse.
static LogicalResult runOnInput(llvm::StringRef inputFilename,
                                llvm::StringRef outputFilename,
                                DialectRegistry &registry) {
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  std::unique_ptr<llvm::MemoryBuffer> input;
  // --show-dialects and --list-passes read no input.
  if (config.shouldShowDialects() || config.shouldListPasses())
    input = llvm::MemoryBuffer::getMemBuffer("");
  else if (auto text = pisa::readInputText(inputFilename)) {
    input = std::move(*text);
  } else {
    llvm::errs() << llvm::toString(text.takeError()) << "\n";
    return failure();
  }
  if (auto unsafe = pisa::findUnsafeInput(input->getBuffer())) {
    llvm::errs() << input->getBufferIdentifier() << ":" << unsafe->line << ":"
                 << unsafe->column << ": error: " << unsafe->reason << "\n";
    return failure();
  }
  // The output is written through a private temporary and put in place
  // only on success: a failed run leaves an existing file as it was.
  if (llvm::Error err =
          pisa::checkOutputs({inputFilename.str()}, {outputFilename.str()})) {
    llvm::errs() << llvm::toString(std::move(err)) << "\n";
    return failure();
  }
  auto output = pisa::OutputFile::create(outputFilename);
  if (!output) {
    llvm::errs() << llvm::toString(output.takeError()) << "\n";
    return failure();
  }
  if (failed(MlirOptMain((*output)->os(), std::move(input), registry, config)))
    return failure();
  if (llvm::Error err = (*output)->commit()) {
    llvm::errs() << llvm::toString(std::move(err)) << "\n";
    return failure();
  }
  return success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  llvm::cl::AddExtraVersionPrinter(
      [](llvm::raw_ostream &os) { os << "pisa " PISA_VERSION_STRING "\n"; });
  // LLVM's own flags (backend tuning, registered when libLLVM loads) move
  // to --help-hidden; what MlirOptMain registers next stays in --help.
  for (auto &option : llvm::cl::getRegisteredOptions())
    if (option.first != "help" && option.first != "version")
      option.second->setHiddenFlag(llvm::cl::Hidden);
  pisa::registerAllPasses();
  DialectRegistry registry;
  pisa::registerAllDialects(registry);
  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "PISA optimizer driver\n", registry);
  return asMainReturnCode(runOnInput(inputFilename, outputFilename, registry));
}
