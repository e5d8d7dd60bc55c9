//===- WalkScoringMMA.cpp - A walk level's scores on tensor cores ---------===//
//
// Layouts (PTX ISA, mma.m16n8k16 bf16), g = lane / 4, i = lane % 4:
// A (the query, 16 heads x 16 of d) holds (head g | g+8, d 2i, 2i+1 | +8);
// B (8 child columns x 16 of d) holds (d 2i, 2i+1 | +8, column g);
// C holds (head g | g+8, columns 2i, 2i+1). Column j of n-tile t is child
// j % 2 of candidate 4t + j / 2, so the two children of candidate 4t + i
// land in one lane's accumulator pair: the per-head LSE over them needs no
// shuffles, and the sum over heads is three (over the lanes sharing i).
//
//===----------------------------------------------------------------------===//

#include "WalkScoringMMA.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::pisa::detail;

namespace {
constexpr int64_t kFanout = 2, kHeads = 16;

Value cmp(ImplicitLocOpBuilder &b, arith::CmpIPredicate pred, Value x,
          Value y) {
  return arith::CmpIOp::create(b, pred, x, y);
}

/// vector<N x 2 x elem> from N vector<2 x elem> registers.
Value fragment(ImplicitLocOpBuilder &b, ArrayRef<Value> pairs) {
  auto pairType = cast<VectorType>(pairs[0].getType());
  auto type = VectorType::get({int64_t(pairs.size()), 2},
                              pairType.getElementType());
  Value v = arith::ConstantOp::create(b, type, b.getZeroAttr(type));
  for (auto [i, pair] : llvm::enumerate(pairs))
    v = vector::InsertOp::create(b, pair, v, ArrayRef<int64_t>{int64_t(i)});
  return v;
}

Value shuffle(ImplicitLocOpBuilder &b, Value v, int64_t laneOrMask,
              gpu::ShuffleMode mode) {
  return gpu::ShuffleOp::create(b, v,
                                arith::ConstantIntOp::create(b, laneOrMask, 32),
                                arith::ConstantIntOp::create(b, 32, 32), mode)
      .getShuffleResult();
}
} // namespace

bool mlir::pisa::detail::canWalkWithMma(Type queryType, int64_t groupSize,
                                        int64_t headDim, int64_t fanout,
                                        int64_t candidates) {
  return queryType.isBF16() && groupSize == kHeads && headDim % 16 == 0 &&
         fanout == kFanout && (kFanout * candidates) % 8 == 0;
}

MmaWalkQuery mlir::pisa::detail::loadMmaWalkQuery(ImplicitLocOpBuilder &b,
                                                  Value queries,
                                                  const QuerySite &site,
                                                  int64_t headDim, Value lane) {
  Value gid = arith::DivUIOp::create(b, lane, indexConst(b, 4));
  Value col = arith::MulIOp::create(
      b, arith::RemUIOp::create(b, lane, indexConst(b, 4)), indexConst(b, 2));
  Value head0 = arith::AddIOp::create(
      b, arith::MulIOp::create(b, site.kvHead, indexConst(b, kHeads)), gid);
  Value head1 = arith::AddIOp::create(b, head0, indexConst(b, 8));
  auto pair = [&](Value head, Value k) -> Value {
    return vector::LoadOp::create(
        b, VectorType::get({2}, b.getBF16Type()), queries,
        ValueRange{site.batch, head, site.query, k}, false, llvm::MaybeAlign(4));
  };
  MmaWalkQuery query{{}, lane};
  for (int64_t s = 0; s < headDim / 16; ++s) {
    Value kLo = arith::AddIOp::create(b, col, indexConst(b, 16 * s));
    Value kHi = arith::AddIOp::create(b, kLo, indexConst(b, 8));
    query.fragments.push_back(fragment(
        b, {pair(head0, kLo), pair(head1, kLo), pair(head0, kHi),
            pair(head1, kHi)}));
  }
  return query;
}

void mlir::pisa::detail::buildMmaLevelScores(
    ImplicitLocOpBuilder &b, const MmaWalkQuery &query, Value children,
    const QuerySite &site, const ChildLevel &level, Value numCausal,
    Value candidates, Value scores, int64_t maxCandidates, int64_t headDim,
    float scale) {
  Type f32 = b.getF32Type(), bf16 = b.getBF16Type();
  const int64_t tiles = kFanout * maxCandidates / 8;
  Value lane = query.lane;
  Value gid = arith::DivUIOp::create(b, lane, indexConst(b, 4));
  Value tig = arith::RemUIOp::create(b, lane, indexConst(b, 4));
  Value col = arith::MulIOp::create(b, tig, indexConst(b, 2));
  Value lastCausal =
      arith::DivUIOp::create(b, site.position, level.keysPerChild);
  Value zero = indexConst(b, 0);

  // Child `c` of candidate `a`: its row within the level (row 0 when it is
  // not a valid child, so that loads stay in bounds) and whether it counts.
  auto child = [&](Value a, Value c) -> std::pair<Value, Value> {
    Value inRange = cmp(b, arith::CmpIPredicate::ult, a, numCausal);
    Value slot = arith::MinUIOp::create(b, a, indexConst(b, maxCandidates - 1));
    Value node = arith::IndexCastOp::create(
        b, b.getIndexType(),
        memref::LoadOp::create(b, candidates, ValueRange{slot}));
    Value row = arith::AddIOp::create(
        b, arith::MulIOp::create(b, node, indexConst(b, kFanout)), c);
    Value valid = arith::AndIOp::create(
        b, inRange,
        arith::AndIOp::create(
            b, cmp(b, arith::CmpIPredicate::ult, row, level.numChildren),
            cmp(b, arith::CmpIPredicate::ule, row, lastCausal)));
    return {arith::SelectOp::create(b, valid, row, zero), valid};
  };

  auto pairType = VectorType::get({2}, f32);
  auto accType = VectorType::get({2, 2}, f32);
  Value negInf = f32Const(b, -std::numeric_limits<float>::infinity());
  Value scaleF = f32Const(b, scale);
  SmallVector<Value> tileScores;
  for (int64_t t = 0; t < tiles; ++t) {
    // B: this lane's column is child gid % 2 of candidate 4t + gid / 2.
    auto [rowB, validB] = child(
        arith::AddIOp::create(b, indexConst(b, 4 * t),
                              arith::DivUIOp::create(b, gid, indexConst(b, 2))),
        arith::RemUIOp::create(b, gid, indexConst(b, 2)));
    (void)validB;
    Value row = arith::AddIOp::create(b, level.rowBase, rowB);
    Value acc = arith::ConstantOp::create(b, accType, b.getZeroAttr(accType));
    for (int64_t s = 0; s < headDim / 16; ++s) {
      SmallVector<Value> hi, lo;
      for (int64_t half = 0; half < 2; ++half) {
        Value k = arith::AddIOp::create(b, col, indexConst(b, 16 * s + 8 * half));
        Value x = vector::LoadOp::create(
            b, pairType, children, ValueRange{site.batch, site.kvHead, row, k},
            false, llvm::MaybeAlign(8));
        Value h = arith::TruncFOp::create(b, VectorType::get({2}, bf16), x);
        Value rest = arith::SubFOp::create(
            b, x, arith::ExtFOp::create(b, pairType, h));
        hi.push_back(h);
        lo.push_back(
            arith::TruncFOp::create(b, VectorType::get({2}, bf16), rest));
      }
      for (Value bFrag : {fragment(b, hi), fragment(b, lo)})
        acc = nvgpu::MmaSyncOp::create(b, query.fragments[s], bFrag, acc,
                                       ArrayRef<int64_t>{16, 8, 16});
    }
    // C: candidate 4t + tig, its children in columns 2 tig and 2 tig + 1.
    Value a = arith::AddIOp::create(b, indexConst(b, 4 * t), tig);
    Value valid[2] = {child(a, indexConst(b, 0)).second,
                      child(a, indexConst(b, 1)).second};
    Value sum = f32Const(b, 0.0f);
    for (int64_t head = 0; head < 2; ++head) {
      Value logit[2];
      for (int64_t c = 0; c < 2; ++c)
        logit[c] = arith::SelectOp::create(
            b, valid[c],
            arith::MulFOp::create(
                b,
                vector::ExtractOp::create(b, acc, ArrayRef<int64_t>{head, c}),
                scaleF),
            negInf);
      Value m = arith::MaximumFOp::create(b, logit[0], logit[1]);
      Value shift = arith::SelectOp::create(
          b, arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, m, negInf),
          f32Const(b, 0.0f), m);
      Value total = arith::AddFOp::create(
          b, math::ExpOp::create(b, arith::SubFOp::create(b, logit[0], shift)),
          math::ExpOp::create(b, arith::SubFOp::create(b, logit[1], shift)));
      sum = arith::AddFOp::create(
          b, sum, arith::AddFOp::create(b, m, math::LogOp::create(b, total)));
    }
    // Heads gid and gid + 8 here; the other 14 on the lanes sharing tig.
    for (int64_t offset : {4, 8, 16})
      sum = arith::AddFOp::create(
          b, sum, shuffle(b, sum, offset, gpu::ShuffleMode::XOR));
    tileScores.push_back(sum);
  }
  // Candidate a's score is tile a / 4's value in lane a % 4; every lane
  // keeps them all, as the redundant selection reads its own copy.
  for (int64_t a = 0; a < maxCandidates; ++a)
    memref::StoreOp::create(
        b, shuffle(b, tileScores[a / 4], a % 4, gpu::ShuffleMode::IDX), scores,
        ValueRange{indexConst(b, a)});
}
