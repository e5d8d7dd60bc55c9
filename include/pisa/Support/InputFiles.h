//===- InputFiles.h - Reading a tool's input text safely --------*- C++ -*-===//
//
// How pisa-opt and pisa-compile read the program they are given: a regular
// file, a pipe (a FIFO, process substitution) or standard input ("-"), at
// most kMaxInputBytes; a directory, a device (/dev/zero never ends) or a
// socket is refused with one line before anything is read, as is a larger
// input (a regular file by its size, a stream once it passes the limit).
//
//===----------------------------------------------------------------------===//

#ifndef PISA_SUPPORT_INPUTFILES_H
#define PISA_SUPPORT_INPUTFILES_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>

namespace mlir::pisa {

/// The largest input text a tool reads: an MLIR program is far smaller.
constexpr uint64_t kMaxInputBytes = uint64_t(1) << 30;

/// The text of `path` ("-": standard input), or one line naming why it
/// cannot be read ("cannot read 'PATH': ...").
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readInputText(llvm::StringRef path, uint64_t maxBytes = kMaxInputBytes);

} // namespace mlir::pisa

#endif // PISA_SUPPORT_INPUTFILES_H
