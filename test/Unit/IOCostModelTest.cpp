//===- IOCostModelTest.cpp - The schedule crossover rule ------------------===//

#include "pisa/Analysis/IOCostModel.h"

#include "gtest/gtest.h"

using namespace mlir::pisa;

namespace {

IOCostInputs inputs(int64_t g, int64_t c, int64_t qTile,
                    std::optional<int64_t> queries = std::nullopt) {
  IOCostInputs in;
  in.groupSize = g;
  in.blockSize = c;
  in.qTile = qTile;
  in.headDim = 128;
  in.numQueries = queries;
  return in;
}

TEST(IOCostModel, PaperCaseIsTwoStage) {
  // 16 + 64/4 = 32 < 64.
  IOCostEstimate est =
      estimateScheduleIO(inputs(16, 64, 4, 4096), SchedulePolicy::Paper);
  EXPECT_TRUE(est.twoStage);
  EXPECT_DOUBLE_EQ(est.twoStageElems, 16 * 128 + 64 * 128 / 4.0);
  EXPECT_DOUBLE_EQ(est.singleStageElems, 64 * 128);
  EXPECT_DOUBLE_EQ(est.twoStageBytes, 2 * est.twoStageElems);
  EXPECT_NE(est.reason.find("32 < C = 64"), std::string::npos) << est.reason;
}

TEST(IOCostModel, EqualityIsSingleStage) {
  // 32 + 64/2 = 64: not strictly less, single-stage.
  IOCostEstimate est =
      estimateScheduleIO(inputs(32, 64, 2, 4096), SchedulePolicy::Paper);
  EXPECT_FALSE(est.twoStage);
  EXPECT_DOUBLE_EQ(est.twoStageElems, est.singleStageElems);
}

TEST(IOCostModel, LargeGroupIsSingleStage) {
  IOCostEstimate est =
      estimateScheduleIO(inputs(64, 64, 4, 4096), SchedulePolicy::Paper);
  EXPECT_FALSE(est.twoStage);
  EXPECT_GT(est.twoStageElems, est.singleStageElems);
}

TEST(IOCostModel, DecodeIsSingleStage) {
  for (SchedulePolicy policy : {SchedulePolicy::Paper, SchedulePolicy::Refined}) {
    IOCostEstimate est = estimateScheduleIO(inputs(16, 64, 4, 1), policy);
    EXPECT_FALSE(est.twoStage);
    EXPECT_NE(est.reason.find("decode"), std::string::npos) << est.reason;
  }
}

TEST(IOCostModel, QTileLargerThanQueryCount) {
  // Two queries cannot share a tile four ways: the refined policy caps
  // Q_tile at 2, and 16 + 64/2 = 48 < 64 still holds; at G = 40 it flips.
  IOCostInputs in = inputs(40, 64, 4, 2);
  IOCostEstimate paper = estimateScheduleIO(in, SchedulePolicy::Paper);
  IOCostEstimate refined = estimateScheduleIO(in, SchedulePolicy::Refined);
  EXPECT_EQ(refined.effectiveQTile, 2);
  EXPECT_TRUE(paper.twoStage);    // 40 + 16 = 56 < 64
  EXPECT_FALSE(refined.twoStage); // 40 + 32 = 72 >= 64
  EXPECT_DOUBLE_EQ(refined.refinedTwoStageElems, 40 * 128 + 64 * 128 / 2.0);
  EXPECT_NE(refined.reason.find("capped"), std::string::npos);
}

TEST(IOCostModel, UnknownQueryCountIsPrefill) {
  IOCostEstimate est =
      estimateScheduleIO(inputs(16, 64, 4), SchedulePolicy::Refined);
  EXPECT_TRUE(est.twoStage);
  EXPECT_EQ(est.effectiveQTile, 4);
}

TEST(IOCostModel, BlockSizeOneIsSingleStage) {
  // C = 1: a leaf is one key, nothing to share: G + 1/Q >= 1 always.
  for (int64_t g : {1, 16})
    for (int64_t q : {1, 4, 64})
      EXPECT_FALSE(
          estimateScheduleIO(inputs(g, 1, q, 1000), SchedulePolicy::Paper)
              .twoStage);
}

TEST(IOCostModel, RejectsOutOfRangeInputs) {
  EXPECT_FALSE(validateIOCostInputs(inputs(16, 64, 4, 100)));
  EXPECT_TRUE(validateIOCostInputs(inputs(0, 64, 4)));
  EXPECT_TRUE(validateIOCostInputs(inputs(16, 0, 4)));
  EXPECT_TRUE(validateIOCostInputs(inputs(16, 64, 0)));
  EXPECT_TRUE(validateIOCostInputs(inputs(16, 64, 4, 0)));
  EXPECT_EQ(*validateIOCostInputs(inputs(16, 64, 0)),
            "expected q-tile >= 1 but got 0");
}

} // namespace

// The paper's setting: g = 2, K = 8, C = 64. At N = 4K (64 leaves, 7
// levels) the walk scores at most 2 + 4 + 8 + 16 + 32 + 32 summaries and
// stage 2 16 leaves of 64 keys; flat selection scores 64 summaries.
TEST(SelectionWork, ShortSequenceFavoursFlat) {
  SelectionWork w = estimateSelectionWork(4096, 64, 2, 8);
  EXPECT_EQ(w.walkRows, 94);
  EXPECT_EQ(w.leafRows, 1024);
  EXPECT_EQ(w.pisaRows, 1118);
  EXPECT_EQ(w.flatRows, 64);
  EXPECT_TRUE(w.flatCheaper);
  EXPECT_NE(w.reason.find("flat selection does"), std::string::npos);
}

// At 128K (2048 leaves, 12 levels) PISA scores 2 + 4 + 8 + 16 + 7 x 32 +
// 1024 = 1278 rows against 2048: the crossover lies between 64K and 128K.
TEST(SelectionWork, LongSequenceFavoursPisa) {
  SelectionWork w = estimateSelectionWork(131072, 64, 2, 8);
  EXPECT_EQ(w.pisaRows, 1278);
  EXPECT_EQ(w.flatRows, 2048);
  EXPECT_FALSE(w.flatCheaper);
  EXPECT_EQ(w.reason.find("flat selection does"), std::string::npos);
  EXPECT_TRUE(estimateSelectionWork(65536, 64, 2, 8).flatCheaper);
}

// Fewer leaves than g*K: every leaf is a contender, N not a multiple of C.
TEST(SelectionWork, FewLeaves) {
  SelectionWork w = estimateSelectionWork(100, 64, 2, 8);
  EXPECT_EQ(w.flatRows, 2);
  EXPECT_EQ(w.leafRows, 2 * 64);
  EXPECT_EQ(w.walkRows, 2);
  EXPECT_TRUE(w.flatCheaper);
}
