//===- OutputFiles.cpp - Writing tool outputs without harming other files -===//

#include "pisa/Support/OutputFiles.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Signals.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <unistd.h>

using namespace mlir::pisa;
namespace fs = llvm::sys::fs;

static llvm::Error refuse(const llvm::Twine &message) {
  return llvm::createStringError(std::errc::invalid_argument, "%s",
                                 message.str().c_str());
}

/// The link's own status (not its target's); std::nullopt if `path` does
/// not exist.
static std::optional<fs::file_status> linkStatus(llvm::StringRef path) {
  fs::file_status st;
  if (fs::status(path, st, /*Follow=*/false) || !fs::exists(st))
    return std::nullopt;
  return st;
}

llvm::Error mlir::pisa::checkOutputTarget(llvm::StringRef path) {
  if (path.empty() || path == "-")
    return llvm::Error::success();
  std::optional<fs::file_status> st = linkStatus(path);
  if (!st) {
    llvm::SmallString<256> parent(path);
    fs::make_absolute(parent);
    llvm::sys::path::remove_filename(parent);
    if (!fs::is_directory(parent))
      return refuse("cannot write '" + path + "': no directory '" + parent +
                    "'");
    return llvm::Error::success();
  }
  const char *what = nullptr;
  switch (st->type()) {
  case fs::file_type::regular_file:
  case fs::file_type::character_file:
  case fs::file_type::fifo_file:
    return llvm::Error::success();
  case fs::file_type::symlink_file:
    what = "a symbolic link (write to the file it names instead)";
    break;
  case fs::file_type::directory_file:
    what = "a directory";
    break;
  case fs::file_type::block_file:
    what = "a block device";
    break;
  default:
    what = "not a regular file, a character device or a FIFO";
    break;
  }
  return refuse("refusing to write output '" + path + "': it is " + what);
}

namespace {
/// What makes two paths the same file: the inode when the file exists, else
/// the parent directory's inode and the name within it.
struct FileIdentity {
  fs::UniqueID id;
  std::string name; ///< empty when `id` is the file's own
  bool operator==(const FileIdentity &o) const {
    return id == o.id && name == o.name;
  }
};
} // namespace

static std::optional<FileIdentity> identify(llvm::StringRef path) {
  fs::UniqueID id;
  if (!fs::getUniqueID(path, id))
    return FileIdentity{id, ""};
  llvm::SmallString<256> parent(path);
  fs::make_absolute(parent);
  llvm::sys::path::remove_dots(parent, /*remove_dot_dot=*/true);
  std::string name = llvm::sys::path::filename(parent).str();
  llvm::sys::path::remove_filename(parent);
  if (fs::getUniqueID(parent, id))
    return std::nullopt; // the parent does not exist: opening will fail
  return FileIdentity{id, name};
}

llvm::Error mlir::pisa::checkOutputs(llvm::ArrayRef<std::string> inputs,
                                     llvm::ArrayRef<std::string> outputs) {
  std::vector<std::pair<const std::string *, FileIdentity>> seen;
  for (const std::string &in : inputs) {
    if (in.empty() || in == "-")
      continue;
    if (std::optional<FileIdentity> id = identify(in))
      seen.push_back({&in, *id});
  }
  size_t numInputs = seen.size();
  for (const std::string &out : outputs) {
    if (out.empty() || out == "-")
      continue;
    if (llvm::Error err = checkOutputTarget(out))
      return err;
    std::optional<FileIdentity> id = identify(out);
    if (!id)
      continue;
    for (auto [i, entry] : llvm::enumerate(seen)) {
      if (!(entry.second == *id))
        continue;
      bool input = i < numInputs;
      return refuse("refusing to write output '" + out +
                    "': it is the same "
                    "file as the " +
                    (input ? "input" : "output") + " '" + *entry.first + "'");
    }
    seen.push_back({&out, *id});
  }
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<OutputFile>>
OutputFile::create(llvm::StringRef path) {
  if (path.empty())
    return refuse("expected an output path but got an empty one");
  if (llvm::Error err = checkOutputTarget(path))
    return std::move(err);
  std::unique_ptr<OutputFile> file(new OutputFile());
  file->target = path.str();
  std::optional<fs::file_status> st = linkStatus(path);
  if (path == "-" || (st && st->type() != fs::file_type::regular_file)) {
    file->inPlace = true;
    file->stream = std::make_unique<llvm::raw_string_ostream>(file->buffer);
    return std::move(file);
  }
  // A private temporary beside the target, so that the rename is atomic
  // and never crosses a file system.
  llvm::SmallString<256> model(path);
  llvm::StringRef name = llvm::sys::path::filename(path);
  llvm::sys::path::remove_filename(model);
  llvm::sys::path::append(model, "." + name + ".pisa-%%%%%%%%.tmp");
  unsigned mode = st ? unsigned(st->permissions()) & 07777
                     : unsigned(fs::all_read | fs::all_write);
  int fd;
  llvm::SmallString<256> temporary;
  if (std::error_code ec =
          fs::createUniqueFile(model, fd, temporary, fs::OF_None, mode))
    return refuse("cannot write '" + path + "': " + ec.message());
  // An existing target keeps its permission bits (umask applied to the
  // temporary's creation would otherwise change them).
  if (st)
    (void)fs::setPermissions(fd, fs::perms(mode));
  file->temporary = temporary.str().str();
  llvm::sys::RemoveFileOnSignal(file->temporary);
  file->stream = std::make_unique<llvm::raw_fd_ostream>(fd,
                                                        /*shouldClose=*/true);
  return std::move(file);
}

OutputFile::~OutputFile() {
  if (committed || temporary.empty())
    return;
  stream.reset();
  fs::remove(temporary);
  llvm::sys::DontRemoveFileOnSignal(temporary);
}

llvm::Error OutputFile::finish() {
  if (inPlace || finished)
    return llvm::Error::success();
  auto *fdStream = static_cast<llvm::raw_fd_ostream *>(stream.get());
  fdStream->close();
  if (fdStream->has_error()) {
    std::error_code ec = fdStream->error();
    fdStream->clear_error();
    return refuse("cannot write '" + target + "': " + ec.message());
  }
  finished = true;
  return llvm::Error::success();
}

llvm::Error OutputFile::commit() {
  if (committed)
    return llvm::Error::success();
  if (inPlace) {
    stream->flush();
    if (target == "-") {
      llvm::outs() << buffer;
      llvm::outs().flush();
      committed = true;
      return llvm::Error::success();
    }
    // O_NOFOLLOW: the target was a device or FIFO when checked; if it has
    // since become a link, nothing is written through it.
    int fd = ::open(target.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
      return refuse("cannot write '" + target + "': " + std::strerror(errno));
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << buffer;
    os.close();
    if (os.has_error()) {
      std::error_code ec = os.error();
      os.clear_error();
      return refuse("cannot write '" + target + "': " + ec.message());
    }
    committed = true;
    return llvm::Error::success();
  }
  if (llvm::Error err = finish())
    return err;
  if (std::error_code ec = fs::rename(temporary, target))
    return refuse("cannot write '" + target + "': " + ec.message());
  llvm::sys::DontRemoveFileOnSignal(temporary);
  committed = true;
  return llvm::Error::success();
}

llvm::Expected<OutputSet> OutputSet::create(llvm::ArrayRef<std::string> paths) {
  if (llvm::Error err = checkOutputs({}, paths))
    return std::move(err);
  OutputSet set;
  for (const std::string &path : paths) {
    if (path.empty()) {
      set.files.push_back(nullptr);
      continue;
    }
    auto file = OutputFile::create(path);
    if (!file)
      return file.takeError();
    set.files.push_back(std::move(*file));
  }
  return std::move(set);
}

llvm::Error OutputSet::commit() {
  // Close every temporary first (a full disk shows here), then rename.
  for (auto &file : files)
    if (file)
      if (llvm::Error err = file->finish())
        return err;
  for (auto &file : files)
    if (file)
      if (llvm::Error err = file->commit())
        return err;
  return llvm::Error::success();
}
