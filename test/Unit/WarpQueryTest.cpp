//===- WarpQueryTest.cpp - The decode block's narrow lane groups ----------===//
//
// narrowQueryWidth (DeviceSelection.h) picks the lanes of a group that
// holds H = P w / 32 heads of a query. Over every G and d a query warp
// takes, the width must be a power of two that divides the warp and d,
// leave every head a group (H >= 1), keep the query's registers (P d / 32)
// within 64, and give a lane at most 16 elements of a row when d is a power
// of two (two child rows in flight in 32 registers), under 32 otherwise
// (d = 96, 160, 192, 224 take one row at a time).
//
//===----------------------------------------------------------------------===//

#include "Selection/DeviceSelection.h"

#include "llvm/Support/MathExtras.h"

#include <gtest/gtest.h>

using namespace mlir::pisa::detail;

TEST(WarpQuery, NarrowWidthOverEveryShape) {
  for (int64_t g = 1; g <= 32; ++g) {
    for (int64_t d = 32; d <= 256; d += 32) {
      SCOPED_TRACE("G = " + std::to_string(g) + ", d = " + std::to_string(d));
      const int64_t padded = int64_t(llvm::PowerOf2Ceil(g));
      const int64_t w = narrowQueryWidth(g, d);
      ASSERT_TRUE(llvm::isPowerOf2_64(uint64_t(w)));
      ASSERT_LE(w, 32);
      EXPECT_EQ(d % w, 0);
      if (w == 32)
        continue; // one element per lane: the wide layout
      EXPECT_LE(padded * d / 32, 64);
      const int64_t heads = padded * w / 32;
      EXPECT_GE(heads, 1);
      EXPECT_LE(d / w, llvm::isPowerOf2_64(uint64_t(d)) ? 16 : 31);
    }
  }
  // The paper setting: 8 lanes of 4 heads, 16 elements each.
  EXPECT_EQ(narrowQueryWidth(16, 128), 8);
}
