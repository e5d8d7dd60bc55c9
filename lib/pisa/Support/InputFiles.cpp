//===- InputFiles.cpp - Reading a tool's input text safely ----------------===//

#include "pisa/Support/InputFiles.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"

using namespace llvm;

namespace {
Error cannotRead(StringRef path, const Twine &why) {
  if (path == "-")
    return createStringError(std::errc::invalid_argument,
                             "cannot read standard input: %s",
                             why.str().c_str());
  return createStringError(std::errc::invalid_argument, "cannot read '%s': %s",
                           path.str().c_str(), why.str().c_str());
}

/// Reads the stream `fd` to its end, refusing it once it passes `maxBytes`.
Expected<std::unique_ptr<MemoryBuffer>>
readStream(StringRef path, sys::fs::file_t fd, uint64_t maxBytes) {
  SmallVector<char, 0> text;
  constexpr size_t kChunk = 1 << 16;
  while (true) {
    const size_t at = text.size();
    text.resize_for_overwrite(at + kChunk);
    Expected<size_t> got =
        sys::fs::readNativeFile(fd, MutableArrayRef(text).slice(at, kChunk));
    if (!got)
      return cannotRead(path, toString(got.takeError()));
    text.truncate(at + *got);
    if (*got == 0)
      break;
    if (text.size() > maxBytes)
      return cannotRead(path, "it is larger than " + Twine(maxBytes) +
                                  " bytes (an MLIR program is far smaller)");
  }
  return MemoryBuffer::getMemBufferCopy(StringRef(text.data(), text.size()),
                                        path == "-" ? "<stdin>" : path);
}
} // namespace

Expected<std::unique_ptr<MemoryBuffer>>
mlir::pisa::readInputText(StringRef path, uint64_t maxBytes) {
  if (path == "-")
    return readStream(path, sys::fs::getStdinHandle(), maxBytes);
  sys::fs::file_status st;
  if (std::error_code ec = sys::fs::status(path, st))
    return cannotRead(path, ec.message());
  switch (st.type()) {
  case sys::fs::file_type::regular_file:
    break;
  case sys::fs::file_type::fifo_file:
    break;
  case sys::fs::file_type::directory_file:
    return cannotRead(path, "Is a directory");
  case sys::fs::file_type::character_file:
  case sys::fs::file_type::block_file:
    return cannotRead(path, "it is a device, not a file (a device such as "
                            "/dev/zero may never end)");
  default:
    return cannotRead(path, "it is not a regular file or a pipe");
  }
  if (st.type() == sys::fs::file_type::regular_file && st.getSize() > maxBytes)
    return cannotRead(path, "it is larger than " + Twine(maxBytes) +
                                " bytes (an MLIR program is far smaller)");
  Expected<sys::fs::file_t> fd = sys::fs::openNativeFileForRead(path);
  if (!fd)
    return cannotRead(path, toString(fd.takeError()));
  auto buffer = readStream(path, *fd, maxBytes);
  sys::fs::closeFile(*fd);
  return buffer;
}
