//===- OutputFiles.h - Writing tool outputs without harming other files -*-===//
//
// How pisa-opt, pisa-compile and pisa-run write what they were asked to
// write, and nothing else:
//  - an output that is the same file as an input, or as another output of
//    the same run (the same path, or the same device and inode), is refused
//    before any work;
//  - an output that is a symbolic link, a directory, a block device or a
//    socket is refused: a tool never writes through a path it did not
//    create;
//  - a regular file (or a path that does not exist yet) is written to a
//    temporary file created exclusively in the target's directory (O_EXCL:
//    never an existing file, never through a link) and renamed over the
//    target only when the whole run succeeded, keeping the target's
//    permission bits; a failed run leaves every existing file as it was;
//  - a character device or a FIFO (`/dev/null`, a pipe) is written in place
//    at commit, as `cp` does, since it cannot be replaced.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_SUPPORT_OUTPUTFILES_H
#define PISA_SUPPORT_OUTPUTFILES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>
#include <vector>

namespace mlir::pisa {

/// One line naming the problem if `path` may not be written as an output:
/// a symbolic link, a directory, a block device or a socket, or a new file
/// in a directory that does not exist.
llvm::Error checkOutputTarget(llvm::StringRef path);

/// Refuses outputs that are an input or another output (same path after
/// normalisation, or the same file by device and inode), and any output
/// checkOutputTarget refuses. Empty paths and "-" (standard output) are
/// skipped.
llvm::Error checkOutputs(llvm::ArrayRef<std::string> inputs,
                         llvm::ArrayRef<std::string> outputs);

/// An output under construction: bytes go to a private temporary (or a
/// buffer, for a device), and reach `path` only on commit(). Destroying an
/// uncommitted OutputFile removes the temporary and leaves `path` as it was.
class OutputFile {
public:
  /// Starts writing `path` ("-" is standard output, written at commit).
  static llvm::Expected<std::unique_ptr<OutputFile>>
  create(llvm::StringRef path);
  ~OutputFile();

  llvm::raw_ostream &os() { return *stream; }
  llvm::StringRef path() const { return target; }
  /// Closes the temporary, reporting a write error (a full disk); the
  /// target is untouched.
  llvm::Error finish();
  /// Moves the bytes into place; an error leaves the target as it was.
  llvm::Error commit();

private:
  OutputFile() = default;
  std::string target, temporary;
  std::string buffer; ///< devices and standard output
  std::unique_ptr<llvm::raw_ostream> stream;
  bool inPlace = false, finished = false, committed = false;
};

/// Several outputs of one run, committed together: each is written to its
/// temporary first; only when all are complete is each renamed into place.
class OutputSet {
public:
  /// Opens every path after checkOutputs; os(i) is nullptr for an empty
  /// path.
  static llvm::Expected<OutputSet> create(llvm::ArrayRef<std::string> paths);
  llvm::raw_ostream *os(size_t i) {
    return files[i] ? &files[i]->os() : nullptr;
  }
  llvm::Error commit();

private:
  std::vector<std::unique_ptr<OutputFile>> files;
};

} // namespace mlir::pisa

#endif // PISA_SUPPORT_OUTPUTFILES_H
