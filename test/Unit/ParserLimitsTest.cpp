//===- ParserLimitsTest.cpp - Text MLIR 22's parser would crash on --------===//

#include "pisa/Support/ParserLimits.h"

#include <gtest/gtest.h>

using mlir::pisa::findDeepNesting;
using mlir::pisa::findUnsafeInput;
using mlir::pisa::kMaxNestingDepth;

namespace {

std::string transpose(const std::string &list) {
  return "%t = linalg.transpose ins(%a : tensor<2x3xf32>) outs(%b : "
         "tensor<3x2xf32>) permutation = " +
         list + "\n";
}

TEST(ParserLimits, WellFormedListsPass) {
  for (const char *list : {"[1, 0]", "[]", "[ 1 ,\n 0 ]", "[0x1, -0]",
                           "[-9223372036854775808]", "[1,0] {attr}"})
    EXPECT_FALSE(findUnsafeInput(transpose(list))) << list;
}

TEST(ParserLimits, MalformedListsAreFound) {
  for (const char *list :
       {"x", "[1, x]", "[", "[1, 0", "[1,]", "[9223372036854775808]",
        "array<i64: 1, 0>", "[1.5]", "[0xg]", ""}) {
    std::string text = transpose(list);
    auto unsafe = findUnsafeInput(text);
    ASSERT_TRUE(unsafe) << list;
    EXPECT_EQ(text.substr(unsafe->offset, 11), "permutation");
  }
}

TEST(ParserLimits, OnlyTheCustomFormsKeyword) {
  // A value named like the keyword, the generic form and a comment are not
  // the list the custom parser reads.
  EXPECT_FALSE(findUnsafeInput(
      "%r = linalg.reduce ins(%dimensions : t) outs(%c : u) dimensions = [1]"));
  EXPECT_TRUE(findUnsafeInput(
      "%r = linalg.reduce ins(%dimensions : t) outs(%c : u) dimensions = [y]"));
  EXPECT_FALSE(findUnsafeInput("%x = \"linalg.broadcast\"(%a, %b) "
                               "<{dimensions = array<i64: 1>}> : (t, u) -> u"));
  EXPECT_FALSE(findUnsafeInput("// linalg.broadcast, then\n"
                               "%y = foo {dimensions = array<i64: 1>}"));
}

TEST(ParserLimits, HugeResultNumbers) {
  EXPECT_FALSE(findUnsafeInput("return %0#65535 : i32"));
  auto unsafe = findUnsafeInput("return %0#65536 : i32");
  ASSERT_TRUE(unsafe);
  EXPECT_EQ(unsafe->offset, 7u);
  EXPECT_EQ(unsafe->line, 1u);
  EXPECT_EQ(unsafe->column, 8u);
  auto below = findUnsafeInput("// first\n  return %0#65536 : i32");
  ASSERT_TRUE(below);
  EXPECT_EQ(below->line, 2u);
  EXPECT_EQ(below->column, 10u);
  EXPECT_NE(unsafe->reason.find("'%0#65536' is above 65535"),
            std::string::npos);
  // The lexer takes `%0 #N` and `%0 // ...` newline `#N` as `%0#N`.
  EXPECT_TRUE(findUnsafeInput("return %0 #2147483647 : i32"));
  EXPECT_TRUE(findUnsafeInput("return %0\t\n #65536 : i32"));
  EXPECT_TRUE(findUnsafeInput("return %0 // c\n  #65536 : i32"));
  EXPECT_FALSE(findUnsafeInput("return %0 // c\n  #1 : i32"));
  EXPECT_FALSE(findUnsafeInput("return %0 : i32 // #65536"));
}

} // namespace

TEST(ParserLimits, DeepNesting) {
  for (auto [open, close] : {std::pair{"tuple<", ">"}, {"(", ")"}, {"[", "]"},
                             {"{", "}"}}) {
    std::string ok, deep;
    for (size_t i = 0; i < kMaxNestingDepth; ++i)
      ok += open;
    for (size_t i = 0; i < kMaxNestingDepth; ++i)
      ok += close;
    EXPECT_EQ(findDeepNesting(ok), llvm::StringRef::npos) << open;
    for (size_t i = 0; i <= kMaxNestingDepth; ++i)
      deep += open;
    size_t last = deep.size() - 1;
    EXPECT_EQ(findDeepNesting(deep), last) << open;
    auto unsafe = findUnsafeInput(deep);
    ASSERT_TRUE(unsafe.has_value());
    EXPECT_EQ(unsafe->column, last + 1);
  }
}

TEST(ParserLimits, NestingIgnoresArrowsComparisonsStringsAndComments) {
  // Many levels opened and closed in sequence never go deep.
  std::string wide;
  for (int i = 0; i < 10000; ++i)
    wide += "affine_map<(d0) -> (d0)> affine_set<(d0) : (d0 >= 0, d0 <= 9)> ";
  EXPECT_EQ(findDeepNesting(wide), llvm::StringRef::npos);
  // Brackets inside a string literal or a comment are not nesting.
  std::string quoted = "\"" + std::string(1000, '(') + "\\\"" + "\"\n// " +
                       std::string(1000, '[') + "\n";
  EXPECT_EQ(findDeepNesting(quoted), llvm::StringRef::npos);
  // `->` closes nothing: 300 arrows inside 200 levels stay at 200.
  std::string arrows = std::string(200, '(') + std::string(300, '-') + ">";
  for (int i = 0; i < 300; ++i)
    arrows += "->";
  EXPECT_EQ(findDeepNesting(arrows), llvm::StringRef::npos);
  EXPECT_NE(findDeepNesting(arrows + std::string(57, '<')),
            llvm::StringRef::npos);
}
