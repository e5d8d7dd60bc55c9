//===- Errors.cpp - The tools' one-line errors ----------------------------===//

#include "pisa/Support/Errors.h"

#include <system_error>

static llvm::Error invalidArgument(const llvm::Twine &message) {
  // The Twine overload: the message is never read as a format string.
  return llvm::createStringError(
      std::make_error_code(std::errc::invalid_argument), message);
}

llvm::Error mlir::pisa::usageError(const llvm::Twine &message) {
  return invalidArgument(message);
}

llvm::Error mlir::pisa::invalidInput(const llvm::Twine &message) {
  return invalidArgument(message);
}
