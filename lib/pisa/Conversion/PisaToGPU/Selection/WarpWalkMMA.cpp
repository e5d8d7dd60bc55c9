//===- WarpWalkMMA.cpp - The two-stage walk on one warp -------------------===//
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

#include "Selection/WarpWalkMMA.h"

#include "Kernels/KernelBuilder.h"
#include "Selection/LaneWalk.h"
#include "Selection/LeafScoreMMA.h"

#include "../Common/ForcedBlocks.h"
#include "../Common/LoopBuilders.h"
#include "../Common/NodeScore.h"

#include "pisa/Analysis/TensorCoreWalk.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::pisa::detail;

namespace {
constexpr int64_t kFanout = 2, kHeads = 16;

} // namespace

bool mlir::pisa::detail::canWalkWithMma(Type queryType, int64_t groupSize,
                                        int64_t headDim, int64_t fanout,
                                        int64_t candidates) {
  return !tensorCoreWalkLimit(queryType.isBF16(), groupSize, headDim, fanout,
                              candidates);
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
    return vector::LoadOp::create(b, VectorType::get({2}, b.getBF16Type()),
                                  queries,
                                  ValueRange{site.batch, head, site.query, k},
                                  false, llvm::MaybeAlign(4));
  };
  MmaWalkQuery query{{}, lane};
  for (int64_t s = 0; s < headDim / 16; ++s) {
    Value kLo = arith::AddIOp::create(b, col, indexConst(b, 16 * s));
    Value kHi = arith::AddIOp::create(b, kLo, indexConst(b, 8));
    query.fragments.push_back(
        mmaFragment(b, {pair(head0, kLo), pair(head1, kLo), pair(head0, kHi),
                        pair(head1, kHi)}));
  }
  return query;
}

MemRefType mlir::pisa::detail::fragmentPlanesType(MemRefType pyramid) {
  ArrayRef<int64_t> shape = pyramid.getShape();
  return globalType({shape[0], shape[1], shape[2], 2 * shape[3]},
                    BFloat16Type::get(pyramid.getContext()));
}

/// 16-byte groups of the planes: 4 per k-step per row.
static Value fragmentGroups(ImplicitLocOpBuilder &b, Value pyramid) {
  int64_t d = cast<MemRefType>(pyramid.getType()).getShape()[3];
  return b.createOrFold<arith::MulIOp>(dimOf(b, pyramid, 2),
                                       indexConst(b, d / 16 * 4));
}

Value mlir::pisa::detail::fragmentPlanesBlocks(ImplicitLocOpBuilder &b,
                                               Value pyramid) {
  return b.createOrFold<arith::CeilDivUIOp>(
      fragmentGroups(b, pyramid), indexConst(b, kFragmentPlanesThreads));
}

Kernel mlir::pisa::detail::buildFragmentPlanesKernel(PatternRewriter &rewriter,
                                                     Operation *anchor,
                                                     MemRefType pyramid) {
  OpBuilder::InsertionGuard guard(rewriter);
  MemRefType planesType = fragmentPlanesType(pyramid);
  Kernel kernel = createKernel(rewriter, anchor, "pyramid_mma_planes",
                               {{"pyramid", pyramid}, {"planes", planesType}});
  ImplicitLocOpBuilder b(anchor->getLoc(), rewriter);
  const int64_t steps = pyramid.getShape()[3] / 16;
  Value heads = indexConst(b, pyramid.getShape()[1]);
  Value batch = arith::DivUIOp::create(b, blockIdY(b), heads);
  Value kv = arith::RemUIOp::create(b, blockIdY(b), heads);
  Value i = arith::AddIOp::create(
      b,
      arith::MulIOp::create(b, blockIdX(b),
                            indexConst(b, kFragmentPlanesThreads)),
      threadIdX(b));
  buildIfThen(
      b,
      cmp(b, arith::CmpIPredicate::ult, i,
          fragmentGroups(b, kernel.arg("pyramid"))),
      [&](ImplicitLocOpBuilder &tb) {
        Value row = arith::DivUIOp::create(tb, i, indexConst(tb, 4 * steps));
        Value group = arith::RemUIOp::create(tb, i, indexConst(tb, 4 * steps));
        Value step = arith::DivUIOp::create(tb, group, indexConst(tb, 4));
        Value tig = arith::RemUIOp::create(tb, group, indexConst(tb, 4));
        // Elements 16 s + 2 t + {0, 1} and + {8, 9}.
        Value k = arith::AddIOp::create(
            tb, arith::MulIOp::create(tb, step, indexConst(tb, 16)),
            arith::MulIOp::create(tb, tig, indexConst(tb, 2)));
        auto pairF32 = VectorType::get({2}, tb.getF32Type());
        auto pairBF16 = VectorType::get({2}, tb.getBF16Type());
        SmallVector<Value> hi, lo;
        for (int64_t offset : {0, 8}) {
          Value x = vector::LoadOp::create(
              tb, pairF32, kernel.arg("pyramid"),
              ValueRange{batch, kv, row,
                         arith::AddIOp::create(tb, k, indexConst(tb, offset))},
              false, llvm::MaybeAlign(8));
          Value h = arith::TruncFOp::create(tb, pairBF16, x);
          hi.push_back(h);
          lo.push_back(arith::TruncFOp::create(
              tb, pairBF16,
              arith::SubFOp::create(tb, x,
                                    arith::ExtFOp::create(tb, pairF32, h))));
        }
        Value packed = concatVectors(tb, concatVectors(tb, hi[0], hi[1]),
                                     concatVectors(tb, lo[0], lo[1]));
        vector::StoreOp::create(
            tb, packed, kernel.arg("planes"),
            ValueRange{batch, kv, row,
                       arith::AddIOp::create(
                           tb,
                           arith::MulIOp::create(tb, step, indexConst(tb, 32)),
                           arith::MulIOp::create(tb, tig, indexConst(tb, 8)))},
            false, llvm::MaybeAlign(16));
      });
  gpu::ReturnOp::create(b);
  return kernel;
}

namespace {
/// Per tile t of the level's product, the score of candidate 4t + lane % 4
/// (the same on the lanes that share lane % 4). `nodeOf(a)` is candidate
/// a's node; candidates at or past numCausal score -inf.
SmallVector<Value>
levelScores(ImplicitLocOpBuilder &b, const MmaWalkQuery &query, Value planes,
            const QuerySite &site, const ChildLevel &level, Value numCausal,
            llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> nodeOf,
            int64_t maxCandidates, int64_t headDim, float scale) {
  Type f32 = b.getF32Type(), bf16 = b.getBF16Type();
  const int64_t tiles = kFanout * maxCandidates / 8;
  Value lane = query.lane;
  Value gid = arith::DivUIOp::create(b, lane, indexConst(b, 4));
  Value tig = arith::RemUIOp::create(b, lane, indexConst(b, 4));
  Value groupCol = arith::MulIOp::create(b, tig, indexConst(b, 8));

  // Child `c` of candidate `a` (whose node is `node`): its row within the
  // level (row 0 when it is not a valid child, so that loads stay in
  // bounds) and whether it counts.
  auto child = [&](Value a, Value node, Value c) {
    return pairChild(b, site, level, numCausal, a, node, c);
  };

  auto accType = VectorType::get({2, 2}, f32);
  auto groupType = VectorType::get({8}, bf16);
  // Scores in base 2 with the scale folded in (exp2 and log2 are single
  // instructions), the head sum taken back to base e once
  // (childPairGroupScore).
  // B: this lane's column of tile t is child gid % 2 of candidate
  // 4t + gid / 2.
  Value columnCandidate = arith::DivUIOp::create(b, gid, indexConst(b, 2));
  Value columnChild = arith::RemUIOp::create(b, gid, indexConst(b, 2));
  SmallVector<Value> tileScores;
  for (int64_t t = 0; t < tiles; ++t) {
    Value aB = arith::AddIOp::create(b, indexConst(b, 4 * t), columnCandidate);
    Value rowB = child(aB, nodeOf(b, aB), columnChild).first;
    Value row = arith::AddIOp::create(b, level.rowBase, rowB);
    Value acc = arith::ConstantOp::create(b, accType, b.getZeroAttr(accType));
    for (int64_t s = 0; s < headDim / 16; ++s) {
      // High halves then low halves of this lane's B fragment (see
      // fragmentPlanesType).
      Value group = vector::LoadOp::create(
          b, groupType, planes,
          ValueRange{site.batch, site.kvHead, row,
                     arith::AddIOp::create(b, groupCol, indexConst(b, 32 * s))},
          false, llvm::MaybeAlign(16));
      auto pairAt = [&](int64_t offset) -> Value {
        return vector::ShuffleOp::create(b, group, group,
                                         ArrayRef<int64_t>{offset, offset + 1});
      };
      Value hi = mmaFragment(b, {pairAt(0), pairAt(2)});
      Value lo = mmaFragment(b, {pairAt(4), pairAt(6)});
      for (Value bFrag : {hi, lo})
        acc = nvgpu::MmaSyncOp::create(b, query.fragments[s], bFrag, acc,
                                       ArrayRef<int64_t>{16, 8, 16});
    }
    // C: candidate 4t + tig, its children in columns 2 tig and 2 tig + 1.
    Value a = arith::AddIOp::create(b, indexConst(b, 4 * t), tig);
    Value node = nodeOf(b, a);
    Value valid[2] = {child(a, node, indexConst(b, 0)).second,
                      child(a, node, indexConst(b, 1)).second};
    tileScores.push_back(
        childPairGroupScore(b, acc, valid, lane, kHeads, scale));
  }
  return tileScores;
}
} // namespace

Value mlir::pisa::detail::buildMmaWarpWalk(
    ImplicitLocOpBuilder &b, const MmaWalkQuery &query, Value planes,
    const QuerySite &site, const LevelLayout &layout, int64_t topK, Value bt,
    int64_t headDim, float scale,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)>
        writeContender) {
  const int64_t maxCandidates = kFanout * topK;
  Value lane = query.lane, lane32 = toI32(b, lane);
  LaneLeaves leaves = buildLaneWalk(
      b, lane, layout, topK, kFanout, bt,
      [&](ImplicitLocOpBuilder &rb, const ChildLevel &children, Value numCausal,
          LaneNodeOf nodeOf) {
        SmallVector<Value> tiles =
            levelScores(rb, query, planes, site, children, numCausal, nodeOf,
                        maxCandidates, headDim, scale);
        // This lane's candidate's score: tile lane / 4, lane % 4.
        Value source = arith::RemUIOp::create(rb, lane, indexConst(rb, 4));
        Value tile = arith::DivUIOp::create(rb, lane, indexConst(rb, 4));
        Value mine = shuffleFrom(rb, tiles[0], source);
        for (int64_t t = 1; t < int64_t(tiles.size()); ++t)
          mine = arith::SelectOp::create(
              rb, cmp(rb, arith::CmpIPredicate::eq, tile, indexConst(rb, t)),
              shuffleFrom(rb, tiles[t], source), mine);
        return mine;
      });
  buildIfThen(b, leaves.contender, [&](ImplicitLocOpBuilder &wb) {
    Value pos = toIndex(
        wb, math::CtPopOp::create(wb, bitsBelow(wb, leaves.mask, lane32)));
    writeContender(wb, pos, leaves.leaf);
  });
  return popCount(b, leaves.mask);
}
