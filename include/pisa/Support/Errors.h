//===- Errors.h - The tools' one-line errors --------------------*- C++ -*-===//
//
// What pisa-compile and pisa-run report as one line before exiting 2: a
// bad command line (usageError) and an input they cannot take, a file or
// a program (invalidInput). Both are std::errc::invalid_argument
// StringErrors made from the Twine itself, never read as a format string
// (a message may quote a user's '%').
//
//===----------------------------------------------------------------------===//

#ifndef PISA_SUPPORT_ERRORS_H
#define PISA_SUPPORT_ERRORS_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace mlir::pisa {

/// A bad command line's one-line error.
llvm::Error usageError(const llvm::Twine &message);

/// A bad input's one-line error: a file or program the tool cannot take.
llvm::Error invalidInput(const llvm::Twine &message);

} // namespace mlir::pisa

#endif // PISA_SUPPORT_ERRORS_H
