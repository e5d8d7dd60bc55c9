//===- InputFilesTest.cpp - How the tools read their input text -----------===//

#include "pisa/Support/InputFiles.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <csignal>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using mlir::pisa::readInputText;

namespace {

/// A fresh directory, removed with its files at the end of a test.
struct TempDir {
  llvm::SmallString<128> path;
  TempDir() {
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("pisa-input", path));
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string file(llvm::StringRef name) const {
    return (path + "/" + name).str();
  }
};

std::string message(llvm::Error error) {
  return llvm::toString(std::move(error));
}

TEST(InputFiles, RegularFileWithinTheLimit) {
  TempDir dir;
  std::string path = dir.file("p.mlir");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << "func.func @f() { return }\n";
  }
  auto text = readInputText(path, 64);
  ASSERT_TRUE(bool(text)) << message(text.takeError());
  EXPECT_EQ((*text)->getBuffer(), "func.func @f() { return }\n");
  EXPECT_EQ((*text)->getBufferIdentifier(), path);
  // One byte over a limit of 25 bytes: refused by its size.
  auto big = readInputText(path, 25);
  ASSERT_FALSE(bool(big));
  EXPECT_NE(message(big.takeError()).find("larger than 25 bytes"),
            std::string::npos);
}

/// A pipe is read to its end, and refused once it passes the limit
/// (a writer that never stops is not read forever).
TEST(InputFiles, PipeWithinAndPastTheLimit) {
  TempDir dir;
  std::string path = dir.file("fifo");
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  // The writer's end outlives the reader's: a failed write, not a signal.
  signal(SIGPIPE, SIG_IGN);
  for (size_t bytes : {size_t(100), size_t(300000)}) {
    std::thread writer([&] {
      int fd = open(path.c_str(), O_WRONLY);
      std::string chunk(bytes, 'x');
      // The reader stops past its limit: the rest of the write fails.
      (void)!write(fd, chunk.data(), chunk.size());
      close(fd);
    });
    auto text = readInputText(path, 1000);
    writer.join();
    if (bytes <= 1000) {
      ASSERT_TRUE(bool(text)) << message(text.takeError());
      EXPECT_EQ((*text)->getBufferSize(), bytes);
    } else {
      ASSERT_FALSE(bool(text));
      EXPECT_NE(message(text.takeError()).find("larger than 1000 bytes"),
                std::string::npos);
    }
  }
}

TEST(InputFiles, DevicesDirectoriesAndMissingFilesAreRefused) {
  TempDir dir;
  auto device = readInputText("/dev/zero");
  ASSERT_FALSE(bool(device));
  EXPECT_EQ(message(device.takeError()),
            "cannot read '/dev/zero': it is a device, not a file (a device "
            "such as /dev/zero may never end)");
  auto directory = readInputText(dir.path);
  ASSERT_FALSE(bool(directory));
  EXPECT_NE(message(directory.takeError()).find("Is a directory"),
            std::string::npos);
  auto missing = readInputText(dir.file("missing.mlir"));
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(message(missing.takeError()).find("cannot read '"),
            std::string::npos);
}

} // namespace
