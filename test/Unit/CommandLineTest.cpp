//===- CommandLineTest.cpp - The option rules of pisa-compile and pisa-run ===//

#include "pisa/Support/CommandLine.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

using mlir::pisa::CommandLine;

namespace {

/// argv for CommandLine: "tool" then `words`.
struct Argv {
  std::vector<std::string> words;
  std::vector<char *> pointers;
  explicit Argv(std::vector<std::string> w) : words(std::move(w)) {
    words.insert(words.begin(), "tool");
    for (std::string &word : words)
      pointers.push_back(word.data());
  }
  int argc() const { return int(pointers.size()); }
  char **argv() { return pointers.data(); }
};

std::string message(llvm::Error err) { return llvm::toString(std::move(err)); }

TEST(CommandLineTest, ValuesInlineOrNext) {
  Argv a({"--out", "o.npy", "--q=--odd", "-o", "-", "input.mlir"});
  CommandLine line(a.argc(), a.argv(), 1, {"-o"});
  ASSERT_TRUE(line.next());
  EXPECT_EQ(line.name(), "--out");
  EXPECT_EQ(*line.value(), "o.npy");
  ASSERT_TRUE(line.next());
  EXPECT_EQ(line.name(), "--q") << "split at the first '='";
  EXPECT_EQ(*line.value(), "--odd") << "an inline value is taken as written";
  ASSERT_TRUE(line.next());
  EXPECT_EQ(line.name(), "-o");
  EXPECT_EQ(*line.value(), "-") << "'-' alone is a value";
  ASSERT_TRUE(line.next());
  EXPECT_EQ(line.name(), "input.mlir");
  EXPECT_FALSE(line.next());
}

TEST(CommandLineTest, MissingValues) {
  {
    Argv a({"--out", "--k", "k.npy"});
    CommandLine line(a.argc(), a.argv(), 1);
    ASSERT_TRUE(line.next());
    llvm::Expected<std::string> v = line.value();
    ASSERT_FALSE(v);
    EXPECT_EQ(message(v.takeError()),
              "option '--out' needs a value but got option '--k'");
  }
  {
    // The short options, given as a temporary list, are still known when
    // a value is asked for.
    Argv a({"--emit", "-o", "x.so"});
    CommandLine line(a.argc(), a.argv(), 1, {"-o", "-h"});
    ASSERT_TRUE(line.next());
    llvm::Expected<std::string> v = line.value();
    ASSERT_FALSE(v);
    EXPECT_EQ(message(v.takeError()),
              "option '--emit' needs a value but got option '-o'");
  }
  {
    Argv a({"--out"});
    CommandLine line(a.argc(), a.argv(), 1);
    ASSERT_TRUE(line.next());
    llvm::Expected<std::string> v = line.value();
    ASSERT_FALSE(v);
    EXPECT_EQ(message(v.takeError()), "option '--out' needs a value");
  }
}

TEST(CommandLineTest, FlagsAndRepeats) {
  {
    Argv a({"--dump-ir", "--dump-ir"});
    CommandLine line(a.argc(), a.argv(), 1);
    ASSERT_TRUE(line.next());
    EXPECT_FALSE(line.flag());
    ASSERT_TRUE(line.next());
    EXPECT_EQ(message(line.flag()), "option '--dump-ir' given twice");
  }
  {
    Argv a({"--no-cache=1"});
    CommandLine line(a.argc(), a.argv(), 1);
    ASSERT_TRUE(line.next());
    EXPECT_EQ(message(line.flag()), "option '--no-cache' takes no value");
  }
  {
    Argv a({"--k", "a", "--k", "b"});
    CommandLine line(a.argc(), a.argv(), 1);
    ASSERT_TRUE(line.next());
    EXPECT_EQ(*line.value(), "a");
    ASSERT_TRUE(line.next());
    llvm::Expected<std::string> again = line.value();
    ASSERT_FALSE(again);
    EXPECT_EQ(message(again.takeError()), "option '--k' given twice");
  }
  {
    Argv a({"--cfg", "x", "--cfg=y"});
    CommandLine line(a.argc(), a.argv(), 1);
    ASSERT_TRUE(line.next());
    EXPECT_EQ(*line.value(/*repeats=*/true), "x");
    ASSERT_TRUE(line.next());
    EXPECT_EQ(*line.value(/*repeats=*/true), "y");
    EXPECT_FALSE(line.next());
  }
}

/// The value of an Expected, or nullopt (its error consumed): a failure
/// compares unequal instead of reading an error as a value.
std::optional<int64_t> valueOf(llvm::Expected<int64_t> v) {
  if (!v) {
    llvm::consumeError(v.takeError());
    return std::nullopt;
  }
  return *v;
}

TEST(CommandLineTest, Integers) {
  using mlir::pisa::parseInteger;
  EXPECT_EQ(valueOf(parseInteger("--k", "12")), 12);
  EXPECT_EQ(valueOf(parseInteger("--k", "-3")), -3);
  EXPECT_EQ(valueOf(parseInteger("--k", "9223372036854775807")), INT64_MAX);
  EXPECT_EQ(valueOf(parseInteger("--q-tile", "1024", 1, 1024)), 1024);
  // Not an integer, past int64, or outside the range: one line naming the
  // option as written, the range only where there is one.
  EXPECT_EQ(message(parseInteger("--k", "two").takeError()),
            "expected an integer for '--k' but got 'two'");
  EXPECT_EQ(message(parseInteger("--k", "9223372036854775808").takeError()),
            "expected an integer for '--k' but got '9223372036854775808'");
  EXPECT_EQ(message(parseInteger("--k", "").takeError()),
            "expected an integer for '--k' but got ''");
  EXPECT_EQ(message(parseInteger("--q-tile", "0", 1, 1024).takeError()),
            "expected an integer in [1, 1024] for '--q-tile' but got '0'");
  EXPECT_EQ(message(parseInteger("--q-tile", "4x", 1, 1024).takeError()),
            "expected an integer in [1, 1024] for '--q-tile' but got '4x'");
}

// Both one-line errors carry the message as written (a quoted '%s' or '%n'
// is never read as a format) and std::errc::invalid_argument.
TEST(CommandLineTest, ErrorsKeepTheirText) {
  for (auto make : {mlir::pisa::usageError, mlir::pisa::invalidInput}) {
    std::string text = "bad '--x%s%n' in 'a%d.npy'";
    llvm::Error err = make(text);
    EXPECT_EQ(llvm::errorToErrorCode(std::move(err)),
              std::make_error_code(std::errc::invalid_argument));
    EXPECT_EQ(message(make(text)), text);
  }
}

} // namespace
