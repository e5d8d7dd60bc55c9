//===- LeafScoreMMA.cpp - A leaf's group score on tensor cores ------------===//
//
// Layouts (PTX ISA, mma.m16n8k16), g = lane / 4, i = lane % 4: A (heads x
// 16 of d) holds (head g | g + 8, k 2i, 2i + 1 | + 8); B (16 of d x 8 keys)
// (k 2i, 2i + 1 | + 8, key g); C (head g | g + 8, keys 2i, 2i + 1).
//
//===----------------------------------------------------------------------===//

#include "Selection/LeafScoreMMA.h"
#include "Kernels/RowSoftmax.h"

#include "Kernels/KernelBuilder.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::pisa::detail;

namespace {
constexpr int64_t kHeadRows = 16, kKeysPerTile = 8;
/// Registers of key rows loaded before any is multiplied (their latencies
/// overlap): a tile takes d / 8 (16 at d = 128, so 4 tiles). Loading all 8
/// tiles of a C = 64 leaf at once measured no faster (CHANGELOG.md's
/// performance history).
constexpr int64_t kKeyRegistersInFlight = 64;

/// Elements [at, at + 2) of a 16-byte group.
Value pairOf(ImplicitLocOpBuilder &b, Value group, int64_t at) {
  return vector::ShuffleOp::create(b, group, group,
                                   ArrayRef<int64_t>{at, at + 1});
}
} // namespace

bool mlir::pisa::detail::canScoreLeavesWithMma(Type elem, int64_t groupSize,
                                               int64_t headDim,
                                               int64_t blockSize) {
  return (elem.isBF16() || elem.isF16()) && groupSize <= kHeadRows &&
         headDim % 32 == 0 && blockSize % kKeysPerTile == 0;
}

bool mlir::pisa::detail::canScoreLevelsWithMma(Type elem, int64_t groupSize,
                                               int64_t headDim,
                                               int64_t blockSize,
                                               int64_t fanout) {
  return elem.isBF16() && fanout == 2 &&
         canScoreLeavesWithMma(elem, groupSize, headDim, blockSize);
}

LeafMmaQuery mlir::pisa::detail::loadLeafMmaQuery(ImplicitLocOpBuilder &b,
                                                  Value queries,
                                                  const QuerySite &site,
                                                  int64_t groupSize,
                                                  int64_t headDim, Value lane) {
  Type elem = cast<MemRefType>(queries.getType()).getElementType();
  auto groupType = VectorType::get({8}, elem);
  Value zeroGroup =
      arith::ConstantOp::create(b, groupType, b.getZeroAttr(groupType));
  Value gid = arith::DivUIOp::create(b, lane, indexConst(b, 4));
  Value col = arith::MulIOp::create(
      b, arith::RemUIOp::create(b, lane, indexConst(b, 4)), indexConst(b, 8));
  Value firstHead =
      arith::MulIOp::create(b, site.kvHead, indexConst(b, groupSize));
  // Group s (16 bytes: elements 32 s + 8 i + [0, 8)) of rows g and g + 8,
  // zeros past G (the load clamped to a real head); all loads are issued
  // before the fragments are built.
  auto rowGroups = [&](Value row) {
    Value real =
        cmp(b, arith::CmpIPredicate::ult, row, indexConst(b, groupSize));
    Value head = arith::AddIOp::create(
        b, firstHead,
        arith::MinUIOp::create(b, row, indexConst(b, groupSize - 1)));
    SmallVector<Value> groups;
    for (int64_t s = 0; s < headDim / 32; ++s) {
      Value e = arith::AddIOp::create(b, col, indexConst(b, 32 * s));
      Value v = vector::LoadOp::create(
          b, groupType, queries, ValueRange{site.batch, head, site.query, e},
          false, llvm::MaybeAlign(16));
      groups.push_back(arith::SelectOp::create(b, real, v, zeroGroup));
    }
    return groups;
  };
  SmallVector<Value> row0 = rowGroups(gid);
  SmallVector<Value> row1 =
      rowGroups(arith::AddIOp::create(b, gid, indexConst(b, 8)));
  LeafMmaQuery query{{}, lane, groupSize};
  for (int64_t s = 0; s < headDim / 16; ++s) {
    // k-step s reads elements 32 (s / 2) + 8 i + 4 (s % 2) + [0, 4).
    const int64_t at = 4 * (s % 2);
    Value g0 = row0[s / 2], g1 = row1[s / 2];
    query.fragments.push_back(
        mmaFragment(b, {pairOf(b, g0, at), pairOf(b, g1, at),
                        pairOf(b, g0, at + 2), pairOf(b, g1, at + 2)}));
  }
  return query;
}

SmallVector<Value> mlir::pisa::detail::buildKeyTileProducts(
    ImplicitLocOpBuilder &b, const LeafMmaQuery &query, Value keys,
    const QuerySite &site, const ChildLevel &keyLevel, Value rowBase,
    Value count, int64_t blockSize, int64_t headDim) {
  Type f32 = b.getF32Type();
  Type elem = cast<MemRefType>(keys.getType()).getElementType();
  const int64_t tiles = blockSize / kKeysPerTile, groups = headDim / 32;
  const int64_t tilesInFlight =
      std::max<int64_t>(1, kKeyRegistersInFlight / (4 * groups));
  Value lane = query.lane;
  Value gid = arith::DivUIOp::create(b, lane, indexConst(b, 4));
  Value tig = arith::RemUIOp::create(b, lane, indexConst(b, 4));
  Value groupCol = arith::MulIOp::create(b, tig, indexConst(b, 8));
  // Rows past the valid ones load the last valid row (in bounds; their
  // columns are masked).
  Value lastRow = arith::SubIOp::create(
      b, arith::MaxSIOp::create(b, count, indexConst(b, 1)), indexConst(b, 1));
  auto groupType = VectorType::get({8}, elem);

  // Tile by tile: lane loads key row 8 t + g of tile t.
  auto accType = VectorType::get({2, 2}, f32);
  SmallVector<Value> acc;
  for (int64_t t0 = 0; t0 < tiles; t0 += tilesInFlight) {
    const int64_t t1 = std::min(tiles, t0 + tilesInFlight);
    SmallVector<SmallVector<Value>> rows;
    for (int64_t t = t0; t < t1; ++t) {
      Value key = arith::MinUIOp::create(
          b, arith::AddIOp::create(b, gid, indexConst(b, kKeysPerTile * t)),
          lastRow);
      Value row = arith::AddIOp::create(b, rowBase, key);
      SmallVector<Value> loaded;
      for (int64_t s = 0; s < groups; ++s)
        loaded.push_back(vector::LoadOp::create(
            b, groupType, keys,
            keyLevel.at(
                b, site, row,
                arith::AddIOp::create(b, groupCol, indexConst(b, 32 * s))),
            false, llvm::MaybeAlign(16)));
      rows.push_back(std::move(loaded));
    }
    for (auto &loaded : rows) {
      Value c = arith::ConstantOp::create(b, accType, b.getZeroAttr(accType));
      for (int64_t s = 0; s < 2 * groups; ++s) {
        Value group = loaded[s / 2];
        const int64_t at = 4 * (s % 2);
        Value bFrag =
            mmaFragment(b, {pairOf(b, group, at), pairOf(b, group, at + 2)});
        c = nvgpu::MmaSyncOp::create(b, query.fragments[s], bFrag, c,
                                     ArrayRef<int64_t>{16, 8, 16});
      }
      acc.push_back(c);
    }
  }
  return acc;
}

SmallVector<Value> mlir::pisa::detail::rowLogits(ImplicitLocOpBuilder &b,
                                                 ArrayRef<Value> acc,
                                                 int64_t half, Value lane,
                                                 Value count, float scale) {
  Value tig = arith::RemUIOp::create(b, lane, indexConst(b, 4));
  Value scaleF = f32Const(b, scale * kLog2E);
  Value negInf = f32Const(b, -std::numeric_limits<float>::infinity());
  SmallVector<Value> logits;
  for (auto [t, tile] : llvm::enumerate(acc))
    for (int64_t c = 0; c < 2; ++c) {
      Value key = arith::AddIOp::create(
          b, arith::MulIOp::create(b, tig, indexConst(b, 2)),
          indexConst(b, kKeysPerTile * int64_t(t) + c));
      Value x = vector::ExtractOp::create(b, tile, ArrayRef<int64_t>{half, c});
      Value visible = cmp(b, arith::CmpIPredicate::ult, key, count);
      logits.push_back(maskedLogit(b, x, visible, scaleF, negInf));
    }
  return logits;
}

namespace {
/// The LSE in base 2 over row `half`'s two columns of `acc`.
Value childPairLse2(ImplicitLocOpBuilder &b, Value acc, int64_t half,
                    ArrayRef<Value> valid, float scale) {
  Value scaleF = f32Const(b, scale * kLog2E);
  Value negInf = f32Const(b, -std::numeric_limits<float>::infinity());
  Value logit[2];
  for (int64_t c = 0; c < 2; ++c)
    logit[c] = maskedLogit(
        b, vector::ExtractOp::create(b, acc, ArrayRef<int64_t>{half, c}),
        valid[c], scaleF, negInf);
  Value m = arith::MaximumFOp::create(b, logit[0], logit[1]);
  Value shift = emptyRowShift(b, m);
  Value e0 = shiftedExp2(b, logit[0], shift);
  Value e1 = shiftedExp2(b, logit[1], shift);
  return lse2FromSum(b, m, arith::AddFOp::create(b, e0, e1));
}
} // namespace

std::pair<Value, Value> mlir::pisa::detail::pairChild(ImplicitLocOpBuilder &b,
                                                      const QuerySite &site,
                                                      const ChildLevel &level,
                                                      Value numCausal, Value a,
                                                      Value node, Value c) {
  using P = arith::CmpIPredicate;
  Value row = arith::AddIOp::create(
      b, arith::MulIOp::create(b, node, indexConst(b, 2)), c);
  Value lastCausal =
      arith::DivUIOp::create(b, site.position, level.keysPerChild);
  Value valid = arith::AndIOp::create(
      b, cmp(b, P::ult, a, numCausal),
      arith::AndIOp::create(b, cmp(b, P::ult, row, level.numChildren),
                            cmp(b, P::ule, row, lastCausal)));
  return {arith::SelectOp::create(b, valid, row, indexConst(b, 0)), valid};
}

Value mlir::pisa::detail::childPairGroupScore(ImplicitLocOpBuilder &b,
                                              Value acc, ArrayRef<Value> valid,
                                              Value lane, int64_t groupSize,
                                              float scale) {
  SmallVector<Value> lse2;
  for (int64_t half = 0; half < 2; ++half)
    lse2.push_back(childPairLse2(b, acc, half, valid, scale));
  return sumHeadRows(b, lse2, lane, groupSize);
}

Value mlir::pisa::detail::sumHeadRows(ImplicitLocOpBuilder &b,
                                      ArrayRef<Value> lse2, Value lane,
                                      int64_t groupSize) {
  Value gid = arith::DivUIOp::create(b, lane, indexConst(b, 4));
  Value sum = f32Const(b, 0.0f);
  for (auto [half, lse] : llvm::enumerate(lse2)) {
    Value term = lse;
    // Heads past G hold zero rows: not summed.
    if (groupSize < kHeadRows)
      term = arith::SelectOp::create(
          b,
          cmp(b, arith::CmpIPredicate::ult,
              arith::AddIOp::create(b, gid, indexConst(b, 8 * int64_t(half))),
              indexConst(b, groupSize)),
          lse, f32Const(b, 0.0f));
    sum = arith::AddFOp::create(b, sum, term);
  }
  // Heads gid and gid + 8 here; the others on the lanes sharing lane % 4.
  sum = laneSum(b, sum, {4, 8, 16});
  return toBaseE(b, sum);
}

Value mlir::pisa::detail::buildLeafScoreMma(ImplicitLocOpBuilder &b,
                                            const LeafMmaQuery &query,
                                            Value keys, const QuerySite &site,
                                            const ChildLevel &keyLevel,
                                            Value leaf, int64_t blockSize,
                                            int64_t headDim, float scale) {
  // A contender's C keys all exist and are visible: no column is masked.
  Value cBlock = indexConst(b, blockSize);
  SmallVector<Value> acc = buildKeyTileProducts(
      b, query, keys, site, keyLevel,
      arith::AddIOp::create(b, keyLevel.rowBase,
                            arith::MulIOp::create(b, leaf, cBlock)),
      cBlock, blockSize, headDim);

  // Per head row (g, g + 8): the LSE over the keys in base 2, the scale
  // (positive, so max(scale x) = scale max(x)) applied in the exponent's
  // fused multiply-add.
  Value scaleF = f32Const(b, scale * kLog2E);
  SmallVector<Value> lse2;
  for (int64_t half = 0; half < 2; ++half) {
    SmallVector<Value> products;
    for (Value tile : acc)
      for (int64_t c = 0; c < 2; ++c)
        products.push_back(
            vector::ExtractOp::create(b, tile, ArrayRef<int64_t>{half, c}));
    lse2.push_back(quadScaledRowLse(b, products, scaleF));
  }
  return sumHeadRows(b, lse2, query.lane, query.groupSize);
}

Value mlir::pisa::detail::buildLevelScoreMma(
    ImplicitLocOpBuilder &b, const LeafMmaQuery &query, Value summaries,
    const QuerySite &site, const ChildLevel &level, Value tile, Value numCausal,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> nodeOf,
    int64_t headDim, float scale) {
  Type f32 = b.getF32Type(), bf16 = b.getBF16Type();
  Value lane = query.lane;
  Value two = indexConst(b, 2), four = indexConst(b, 4);
  Value gid = arith::DivUIOp::create(b, lane, four);
  Value tig = arith::RemUIOp::create(b, lane, four);
  Value firstCandidate = arith::MulIOp::create(b, tile, four);
  auto child = [&](Value a, Value node, Value c) {
    return pairChild(b, site, level, numCausal, a, node, c);
  };

  // B: this lane's column is child gid % 2 of candidate gid / 2 (row 0 of
  // the level when it does not count, so that the loads stay in bounds);
  // k-step s reads elements 32 (s / 2) + 8 i + 4 (s % 2) + [0, 4), one
  // 16-byte load, all issued before the first product.
  Value columnCandidate = arith::AddIOp::create(
      b, firstCandidate, arith::DivUIOp::create(b, gid, two));
  Value row =
      arith::AddIOp::create(b, level.rowBase,
                            child(columnCandidate, nodeOf(b, columnCandidate),
                                  arith::RemUIOp::create(b, gid, two))
                                .first);
  auto quadType = VectorType::get({4}, f32);
  Value groupCol = arith::MulIOp::create(b, tig, indexConst(b, 8));
  SmallVector<Value> quads;
  for (int64_t s = 0; s < headDim / 16; ++s)
    quads.push_back(vector::LoadOp::create(
        b, quadType, summaries,
        level.at(b, site, row,
                 arith::AddIOp::create(
                     b, groupCol, indexConst(b, 32 * (s / 2) + 4 * (s % 2)))),
        false, llvm::MaybeAlign(16)));

  // Each summary split into bf16 halves: the high one its top 16 bits (a
  // mask, exact in bf16), the low one the exact rest rounded to bf16, so
  // x is represented to 2^-15 of itself (the two-stage walk's planes round
  // the high half, 2^-16, which takes twice the instructions here: 0.6 us
  // of a 131K decode step, CHANGELOG.md's performance history). The products
  // accumulate in f32 in two chains (the level is on the walk's critical path),
  // added at the end.
  auto pairBF16 = VectorType::get({2}, bf16);
  auto accType = VectorType::get({2, 2}, f32);
  Value accHi = arith::ConstantOp::create(b, accType, b.getZeroAttr(accType));
  Value accLo = accHi;
  auto quadI32 = VectorType::get({4}, b.getI32Type());
  Value highMask = arith::ConstantOp::create(
      b, quadI32, DenseElementsAttr::get(quadI32, int32_t(0xFFFF0000u)));
  for (auto [s, quad] : llvm::enumerate(quads)) {
    Value high = vector::BitCastOp::create(
        b, quadType,
        arith::AndIOp::create(b, vector::BitCastOp::create(b, quadI32, quad),
                              highMask));
    Value low = arith::SubFOp::create(b, quad, high);
    SmallVector<Value> hi, lo;
    for (int64_t at : {0, 2}) {
      auto pair = [&](Value v) {
        return arith::TruncFOp::create(
            b, pairBF16,
            vector::ShuffleOp::create(b, v, v, ArrayRef<int64_t>{at, at + 1}));
      };
      hi.push_back(pair(high));
      lo.push_back(pair(low));
    }
    accHi = nvgpu::MmaSyncOp::create(b, query.fragments[s], mmaFragment(b, hi),
                                     accHi, ArrayRef<int64_t>{16, 8, 16});
    accLo = nvgpu::MmaSyncOp::create(b, query.fragments[s], mmaFragment(b, lo),
                                     accLo, ArrayRef<int64_t>{16, 8, 16});
  }
  Value acc = arith::AddFOp::create(b, accHi, accLo);

  // C: candidate 4 tile + i, its children in columns 2 i and 2 i + 1; per
  // head row (gid, gid + 8) the LSE over them in base 2 with the scale
  // folded in, heads past G left out of the sum.
  Value a = arith::AddIOp::create(b, firstCandidate, tig);
  Value node = nodeOf(b, a);
  Value valid[2] = {child(a, node, indexConst(b, 0)).second,
                    child(a, node, indexConst(b, 1)).second};
  return childPairGroupScore(b, acc, valid, lane, query.groupSize, scale);
}
