//===- PyramidLayoutTest.cpp - Level sizes and offsets --------------------===//

#include "pisa/Analysis/PyramidLayout.h"

#include "gtest/gtest.h"

using namespace mlir::pisa;

namespace {

TEST(PyramidLayout, PartialLastBlockAndLevels) {
  // 200 keys, C = 64: 4 leaves (last has 8 keys), then 2, then the root.
  PyramidLayout layout(200, 64, 2);
  ASSERT_EQ(layout.numLevels(), 3);
  EXPECT_EQ(layout.size(1), 4);
  EXPECT_EQ(layout.size(2), 2);
  EXPECT_EQ(layout.size(3), 1);
  EXPECT_EQ(layout.offset(1), 0);
  EXPECT_EQ(layout.offset(2), 4);
  EXPECT_EQ(layout.offset(3), 6);
  EXPECT_EQ(layout.totalNodes(), 7);
  EXPECT_EQ(layout.leavesPerNode(3), 4);
}

TEST(PyramidLayout, SingleLeafIsTheRoot) {
  for (int64_t n : {1, 63, 64}) {
    PyramidLayout layout(n, 64, 2);
    EXPECT_EQ(layout.numLevels(), 1);
    EXPECT_EQ(layout.totalNodes(), 1);
  }
}

TEST(PyramidLayout, LevelCountIsOnePlusCeilLog) {
  // L = 1 + ceil(log_g M1).
  for (int64_t g : {2, 3, 4}) {
    for (int64_t m1 = 1; m1 < 300; ++m1) {
      PyramidLayout layout(m1 * 8, 8, g);
      int64_t levels = 1, reach = 1;
      while (reach < m1) {
        reach *= g;
        ++levels;
      }
      EXPECT_EQ(layout.numLevels(), levels) << "M1 = " << m1 << " g = " << g;
    }
  }
}

TEST(PyramidLayout, MillionsOfKeysUse64BitExtents) {
  // 2^31 + 5 keys with C = 1: offsets above 2^31 must not wrap.
  PyramidLayout layout((int64_t(1) << 31) + 5, 1, 2);
  EXPECT_EQ(layout.numLeaves(), (int64_t(1) << 31) + 5);
  EXPECT_GT(layout.totalNodes(), int64_t(1) << 32);
  EXPECT_EQ(layout.offset(2), (int64_t(1) << 31) + 5);
}

} // namespace
