//===- ParserLimitsTest.cpp - Text MLIR 22's parser would crash on --------===//

#include "pisa/Support/ParserLimits.h"

#include <gtest/gtest.h>

using mlir::pisa::findUnsafeInput;

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
}

} // namespace
