//===- AttentionInRegisters.cpp - Sparse attention, S, P, O in registers -===//
//
// pisa.kernel.sparse_attention when the query's G heads fit one m16 tile
// (attendsInRegisters): one block of four warps per four consecutive
// queries of a batch x KV head, warp w attending query w of the block from
// its first attended block to its last, FlashAttention-2 style:
//
//   S = Q K^T      the keys loaded from global memory straight into mma
//                  B fragments (the leaf scorer's d-permuted 16-byte loads,
//                  LeafScoreMMA.h); Q's A fragments loaded once
//   softmax        online, per head row, on the S accumulators in registers
//   O = O alpha + P V   P's A fragments are S's accumulators rounded to the
//                  element type (an m16n8 C pair is an m16n8k16 A); V
//                  copied asynchronously (cp.async, through L1) into the
//                  warp's own shared tile while S is computed, read with
//                  ldmatrix.trans
//
// so that only V passes through shared memory, once, and no block barrier
// is taken. The four queries run at the same time and share their forced
// blocks (the first and the last two), so the loads of those meet in L1:
// measured 22-23% faster at 64K and 256K than four warps splitting one
// query's blocks in turn (performance.md). At the end the warp writes its
// rows through its own shared slot (16-byte stores), divided by the sum,
// with their lse.
//
// The staged kernel (SparseAttentionToGPU.cpp) measured bound by its
// shared-memory traffic (Q, K, V, S, P and O tiles: about 130 KB a block
// for the 32 KB staged; CHANGELOG.md's performance history); this one moves 32
// KB.
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionSteps.h"
#include "Attention/SparseAttention.h"
#include "Attention/WarpPerQuery.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/TileCopy.h"
#include "Selection/LeafScoreMMA.h"
#include "Selection/QueryKernels.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

namespace {
constexpr int64_t kHeadRows = 16;     // one m16 tile of head rows
constexpr int64_t kKeysPerStep = 16;  // a k16 step of P V
constexpr int64_t kValuesPerTile = 8; // an n8 tile of O
/// Registers a lane gives O and S (dv / 2 and C / 2): within ptxas's 255
/// with Q's fragments (d / 4) and the keys in flight.
constexpr int64_t kMaxRegisterValueDim = 128;
constexpr int64_t kMaxRegisterBlockSize = 64;
constexpr int64_t kMaxRegisterHeadDim = 128;

} // namespace

bool mlir::pisa::detail::attendsInRegisters(Type elem, int64_t groupSize,
                                            int64_t d, int64_t dv, int64_t c) {
  return canScoreLeavesWithMma(elem, groupSize, d, c) &&
         groupSize <= kHeadRows && d <= kMaxRegisterHeadDim &&
         dv % kValuesPerTile == 0 && dv <= kMaxRegisterValueDim &&
         c % kKeysPerStep == 0 && c <= kMaxRegisterBlockSize;
}

RegisterAttentionPlan::RegisterAttentionPlan(int64_t d, int64_t dv, int64_t c,
                                             int64_t topK)
    : headDim(d), valueDim(dv), blockSize(c), topK(topK) {
  valueStride = dv + kChunkElems;
  valueTileBytes = llvm::alignTo(c * valueStride * 2, 16);
  // The result: O [16 x dv] then max and sum [16] each (f32), in the
  // warp's slot once its V tile is done with.
  resultStride = kHeadRows * dv + 2 * kHeadRows;
  warpBytes = llvm::alignTo(std::max(valueTileBytes, resultStride * 4), 16);
  listOffset = kAttentionWarps * warpBytes;
  listBytes = llvm::alignTo(topK * 4, 16);
  bytes = listOffset + kAttentionWarps * listBytes;
}

namespace {

/// The kernel body (WarpPerQuery.h: a warp per query). Lane (g, i) =
/// (lane / 4, lane % 4) holds rows g and g + 8 of every accumulator (the
/// m16n8 C layout).
class WarpAttention : WarpPerQuery {
public:
  WarpAttention(ImplicitLocOpBuilder &b, const Kernel &e,
                const RegisterAttentionPlan &plan, int64_t groupSize,
                int64_t kvHeads, float scale)
      : WarpPerQuery(b, e, kvHeads, plan.blockSize, plan.topK), plan(plan),
        G(groupSize), scale(scale) {
    Value listBytes = indexConst(b, plan.listBytes);
    list =
        view(b,
             arith::AddIOp::create(b, indexConst(b, plan.listOffset),
                                   arith::MulIOp::create(b, warp, listBytes)),
             {plan.topK}, b.getI32Type());
    slot = arith::MulIOp::create(b, warp, indexConst(b, plan.warpBytes));
    valueTile = view(b, slot, {plan.blockSize, plan.valueStride}, elem);
  }

  void build(ImplicitLocOpBuilder &b) {
    // Warp w attends the block's query w.
    forEachQuery(b, kAttentionQueriesPerBlock,
                 [&](ImplicitLocOpBuilder &qb, Value q, Value batchRules) {
                   attendQuery(qb, q, batchRules);
                 });
  }

  /// The warp's query, from its list (the warp writes it to its own slot)
  /// to its output rows; no block barrier (the other warps attend other
  /// queries, each in its own shared slot).
  void attendQuery(ImplicitLocOpBuilder &b, Value q0, Value batchRules) {
    const float negInf = -std::numeric_limits<float>::infinity();
    Value count = beginQuery(b, q0, batchRules, list);
    LeafMmaQuery q =
        loadLeafMmaQuery(b, e.arg("queries"), site, G, plan.headDim, lane);
    syncWarp(b); // the list is visible to the warp

    // State: max and sum of rows g and g + 8 (the sums this lane's
    // columns' share), then O's accumulators, one per n8 tile of dv.
    const int64_t valueTiles = plan.valueDim / kValuesPerTile;
    auto accType = VectorType::get({2, 2}, b.getF32Type());
    SmallVector<Value> init{f32Const(b, negInf), f32Const(b, negInf),
                            f32Const(b, 0.0f), f32Const(b, 0.0f)};
    for (int64_t t = 0; t < valueTiles; ++t)
      init.push_back(
          arith::ConstantOp::create(b, accType, b.getZeroAttr(accType)));
    SmallVector<Value> state = forEachEntry(
        b, list, count, init, plan.prefetchEntries, plan.headDim, plan.valueDim,
        [&](ImplicitLocOpBuilder &lb, Value j, ValueRange st)
            -> SmallVector<Value> { return attend(lb, q, j, st); });
    writeRows(b, state);
  }

private:
  Value view(ImplicitLocOpBuilder &b, Value offset, ArrayRef<int64_t> shape,
             Type type) const {
    return tiles.viewAt(b, offset, shape, type);
  }

  /// List entry j: S, the online softmax and O = O alpha + P V. `st` and
  /// the result are the loop's state (build()).
  SmallVector<Value> attend(ImplicitLocOpBuilder &b, const LeafMmaQuery &q,
                            Value j, ValueRange st) const {
    Type f32 = b.getF32Type();
    // V's rows copied into the warp's tile while S reads K's.
    Entry entry =
        beginEntry(b, list, j, e.arg("values"), valueTile, plan.valueDim);
    Value visible = entry.visible;
    SmallVector<Value> s =
        gatherProducts(b, q, e.arg("keys"), entry, plan.headDim);

    // Per row half (g, g + 8): logits in base 2, masked past `visible`.
    SmallVector<Value> next(st.begin(), st.end());
    SmallVector<Value> alpha(2), probs[2];
    for (int64_t half = 0; half < 2; ++half) {
      SmallVector<Value> logits = rowLogits(b, s, half, lane, visible, scale);
      Value oldMax = st[half];
      auto [newMax, shift] = onlineMaxStep(b, oldMax, quadRowMax(b, logits));
      Value sum = f32Const(b, 0.0f);
      for (Value x : logits) {
        Value p = shiftedExp2(b, x, shift);
        probs[half].push_back(p);
        sum = arith::AddFOp::create(b, sum, p);
      }
      alpha[half] = rescaleFactor(b, oldMax, shift);
      next[half] = newMax;
      next[2 + half] = rescaledSum(b, st[2 + half], alpha[half], sum);
    }
    auto accType = VectorType::get({2, 2}, f32);
    Value alphaTile = vector::FromElementsOp::create(
        b, accType, ValueRange{alpha[0], alpha[0], alpha[1], alpha[1]});

    // P's A fragments: k-step u is S's tiles 2u and 2u + 1.
    auto pairType = VectorType::get({2}, elem);
    auto pair = [&](int64_t half, int64_t t) -> Value {
      Value v = vector::FromElementsOp::create(
          b, VectorType::get({2}, f32),
          ValueRange{probs[half][2 * t], probs[half][2 * t + 1]});
      return arith::TruncFOp::create(b, pairType, v);
    };
    SmallVector<Value> pFrags;
    for (int64_t u = 0; u < plan.blockSize / kKeysPerStep; ++u)
      pFrags.push_back(
          mmaFragment(b, {pair(0, 2 * u), pair(1, 2 * u), pair(0, 2 * u + 1),
                          pair(1, 2 * u + 1)}));

    // V is in the tile, seen by every lane of the warp.
    nvgpu::DeviceAsyncWaitOp::create(b, entry.copied, b.getI32IntegerAttr(0));
    syncWarp(b);
    Value row16 = arith::RemUIOp::create(b, lane, indexConst(b, 16));
    auto bType = VectorType::get({2, 2}, elem);
    for (int64_t t = 0; t < plan.valueDim / kValuesPerTile; ++t) {
      Value o = arith::MulFOp::create(b, st[4 + t], alphaTile);
      for (int64_t u = 0; u < plan.blockSize / kKeysPerStep; ++u) {
        Value vFrag = nvgpu::LdMatrixOp::create(
            b, bType, valueTile,
            ValueRange{arith::AddIOp::create(b, row16,
                                             indexConst(b, kKeysPerStep * u)),
                       indexConst(b, kValuesPerTile * t)},
            /*transpose=*/true, /*numTiles=*/2);
        o = nvgpu::MmaSyncOp::create(b, pFrags[u], vFrag, o,
                                     ArrayRef<int64_t>{16, 8, 16});
      }
      next[4 + t] = o;
    }
    return next;
  }

  /// The warp's rows written: o = O / sum (0 without keys), lse = ln 2 (max
  /// + log2 sum) (-inf without keys), through the warp's own shared slot so
  /// that each lane stores 16-byte chunks.
  void writeRows(ImplicitLocOpBuilder &b, ValueRange st) const {
    Value part = publishResult(b, st);
    syncWarp(b);
    // Lane n takes 8 columns of a row: items lane, lane + 32, ...
    ChunkedTile items{G, plan.valueDim, kLanes};
    for (int64_t n = 0; n < items.passes(); ++n) {
      Value i = items.chunk(b, lane, n);
      buildIfThen(
          b, cmp(b, arith::CmpIPredicate::ult, i, indexConst(b, items.count())),
          [&](ImplicitLocOpBuilder &wb) {
            Value row = items.row(wb, i), col = items.column(wb, i);
            writeChunk(wb, part, row, col);
          });
    }
  }

  /// Writes this warp's result to its shared slot, [stride]: per row its
  /// O, then its max and its sum (over the quad: each lane summed its own
  /// columns). Returns that buffer.
  Value publishResult(ImplicitLocOpBuilder &b, ValueRange st) const {
    const int64_t dv = plan.valueDim, stride = plan.resultStride;
    SmallVector<Value> sums{st[2], st[3]};
    for (Value &sum : sums)
      for (int64_t offset : {1, 2})
        sum = arith::AddFOp::create(b, sum, shuffleXor(b, sum, offset));
    syncWarp(b); // the warp is done with its V tile
    Value part = view(b, slot, {stride}, b.getF32Type());
    for (int64_t half = 0; half < 2; ++half) {
      Value row = arith::AddIOp::create(b, gid, indexConst(b, 8 * half));
      for (int64_t t = 0; t < dv / kValuesPerTile; ++t) {
        Value col = arith::AddIOp::create(
            b, arith::MulIOp::create(b, tig, indexConst(b, 2)),
            indexConst(b, kValuesPerTile * t));
        Value at = arith::AddIOp::create(
            b, arith::MulIOp::create(b, row, indexConst(b, dv)), col);
        Value v =
            vector::ExtractOp::create(b, st[4 + t], ArrayRef<int64_t>{half});
        vector::StoreOp::create(b, v, part, ValueRange{at});
      }
      buildIfThen(
          b, cmp(b, arith::CmpIPredicate::eq, tig, indexConst(b, 0)),
          [&](ImplicitLocOpBuilder &wb) {
            Value at =
                arith::AddIOp::create(wb, row, indexConst(wb, kHeadRows * dv));
            memref::StoreOp::create(wb, st[half], part, ValueRange{at});
            memref::StoreOp::create(wb, sums[half], part,
                                    ValueRange{arith::AddIOp::create(
                                        wb, at, indexConst(wb, kHeadRows))});
          });
    }
    return part;
  }

  /// Columns [col, col + 8) of head row `row` from the warp's slot: its
  /// output chunk, and (from the lane of column 0) its LSE.
  void writeChunk(ImplicitLocOpBuilder &wb, Value part, Value row,
                  Value col) const {
    Type f32 = wb.getF32Type();
    const int64_t dv = plan.valueDim;
    auto chunkType = VectorType::get({kChunkElems}, f32);
    Value maxAt =
        arith::AddIOp::create(wb, row, indexConst(wb, kHeadRows * dv));
    Value sumAt = arith::AddIOp::create(wb, maxAt, indexConst(wb, kHeadRows));
    Value m = memref::LoadOp::create(wb, part, ValueRange{maxAt});
    Value total = memref::LoadOp::create(wb, part, ValueRange{sumAt});
    Value at = arith::AddIOp::create(
        wb, arith::MulIOp::create(wb, row, indexConst(wb, dv)), col);
    Value o = vector::LoadOp::create(wb, chunkType, part, ValueRange{at});
    std::pair<Value, Value> end =
        brokenBatchAsNaN(wb, keys, rowEnd(wb, m, total));
    Value inverse = end.first, lse = end.second;
    Value head = arith::AddIOp::create(
        wb, arith::MulIOp::create(wb, kv, indexConst(wb, G)), row);
    Value out = arith::TruncFOp::create(
        wb, VectorType::get({kChunkElems}, elem),
        arith::MulFOp::create(
            wb, o, vector::BroadcastOp::create(wb, chunkType, inverse)));
    vector::StoreOp::create(wb, out, e.arg("output"),
                            ValueRange{batch, head, query, col}, false,
                            llvm::MaybeAlign(16));
    buildIfThen(wb, cmp(wb, arith::CmpIPredicate::eq, col, indexConst(wb, 0)),
                [&](ImplicitLocOpBuilder &lb) {
                  memref::StoreOp::create(lb, lse, e.arg("lse"),
                                          ValueRange{batch, head, query});
                });
  }

  const RegisterAttentionPlan &plan;
  int64_t G;
  float scale;
  Value list, slot, valueTile;
};

} // namespace

void mlir::pisa::detail::buildRegisterAttention(
    ImplicitLocOpBuilder &b, const Kernel &kernel,
    const RegisterAttentionPlan &plan, int64_t groupSize, int64_t kvHeads,
    float scale) {
  WarpAttention(b, kernel, plan, groupSize, kvHeads, scale).build(b);
}
