//===- QueryGradInRegisters.cpp - dq of sparse attention, a warp a query --===//
//
// pisa.kernel.sparse_attention_grad_queries where queryGradInRegisters
// takes the sizes and no query tile is asked for: one block of four warps
// per four consecutive queries of a batch x KV head, warp w computing
// query w's dq from its first attended block to its last, as the forward's
// register kernel attends (AttentionInRegisters.cpp; the walk both share is
// WarpPerQuery.h), with no copying warp and no block barrier. For each
// attended block:
//
//   K's rows copied asynchronously (cp.async, through L1) into the warp's
//   own tile, while
//   dP = dO V^T    V loaded from global memory straight into mma B
//                  fragments, dO's A fragments loaded once (the leaf
//                  scorer's d-permuted 16-byte loads, LeafScoreMMA.h)
//   S = Q K^T      from the warp's Q tile and the K tile by ldmatrix
//   dS = P (dP - D), dQ += dS K    (WarpQueryGrad.h), K by ldmatrix.trans
//
// so that only K passes through shared memory, once. The four queries run
// at the same time and share their forced blocks, whose loads meet in L1.
// WarpQueryGrad.h's pieces are the query-tile kernel's: a warp's sum runs
// in its query's block order in both, and D is written for the key kernel
// the same way.
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionGrad.h"
#include "Attention/AttentionSteps.h"
#include "Attention/SparseAttention.h"
#include "Attention/WarpPerQuery.h"
#include "Attention/WarpQueryGrad.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/TileCopy.h"
#include "Kernels/WarpMma.h"
#include "Selection/LeafScoreMMA.h"
#include "Selection/QueryKernels.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

using P = arith::CmpIPredicate;

WarpQueryGrad::WarpQueryGrad(const Kernel &e, const ThreadPlace &at,
                             Value query, Value hasQuery, const QueryKeys &keys,
                             int64_t groupSize, int64_t valueDim, float scale)
    : e(e), batch(at.batch), kv(at.kv), lane(at.lane), gid(at.gid), tig(at.tig),
      query(query), hasQuery(hasQuery), keys(keys), G(groupSize),
      valueDim(valueDim), scale(scale) {
  elem = cast<MemRefType>(e.arg("queries").getType()).getElementType();
}

Value WarpQueryGrad::headOf(ImplicitLocOpBuilder &b, Value row) const {
  return arith::AddIOp::create(
      b, arith::MulIOp::create(b, kv, indexConst(b, G)),
      arith::MinUIOp::create(b, row, indexConst(b, G - 1)));
}

std::pair<Value, Value> WarpQueryGrad::headRow(ImplicitLocOpBuilder &b,
                                               int64_t half) const {
  Value row = arith::AddIOp::create(b, gid, indexConst(b, 8 * half));
  Value isHead =
      arith::AndIOp::create(b, cmp(b, P::ult, row, indexConst(b, G)), hasQuery);
  return {row, isHead};
}

void WarpQueryGrad::beginRows(ImplicitLocOpBuilder &b) {
  for (int64_t half = 0; half < 2; ++half) {
    auto [row, isHead] = headRow(b, half);
    Value head = headOf(b, row);
    Value lse =
        memref::LoadOp::create(b, e.arg("lse"), ValueRange{batch, head, query});
    shift[half] = probabilityShift(b, lse, isHead);
    delta[half] = rowDelta(b, head, isHead);
  }
}

Value WarpQueryGrad::rowDelta(ImplicitLocOpBuilder &b, Value head,
                              Value isHead) const {
  const int64_t quarter = valueDim / 4;
  Type f32 = b.getF32Type();
  auto wide = VectorType::get({quarter}, f32);
  SmallVector<Value> at{batch, head, query,
                        arith::MulIOp::create(b, tig, indexConst(b, quarter))};
  // The lane's quarter starts at a multiple of its bytes: aligned to them
  // up to 16 (wide loads, not one per element).
  const int64_t bytes = quarter * 2;
  const int64_t align = std::min<int64_t>(16, bytes & -bytes);
  auto load = [&](Value src) -> Value {
    Value v =
        vector::LoadOp::create(b, VectorType::get({quarter}, elem), src,
                               ValueRange(at), false, llvm::MaybeAlign(align));
    return arith::ExtFOp::create(b, wide, v);
  };
  Value sum = vector::ReductionOp::create(
      b, vector::CombiningKind::ADD,
      arith::MulFOp::create(b, load(e.arg("gradOutput")),
                            load(e.arg("output"))));
  for (int64_t offset : kQuadLanes)
    sum = arith::AddFOp::create(b, sum, shuffleXor(b, sum, offset));
  Value d = arith::SelectOp::create(b, isHead, sum, f32Const(b, 0.0f));
  buildIfThen(
      b, arith::AndIOp::create(b, isHead, cmp(b, P::eq, tig, indexConst(b, 0))),
      [&](ImplicitLocOpBuilder &wb) {
        memref::StoreOp::create(wb, d, e.arg("delta"),
                                ValueRange{batch, head, query});
      });
  return d;
}

SmallVector<SmallVector<Value>>
WarpQueryGrad::scoreGradients(ImplicitLocOpBuilder &b, ArrayRef<Value> s,
                              ArrayRef<Value> dp, Value visible) const {
  SmallVector<SmallVector<Value>> grads(s.size());
  for (int64_t half = 0; half < 2; ++half) {
    SmallVector<Value> logits = rowLogits(b, s, half, lane, visible, scale);
    for (size_t t = 0; t < s.size(); ++t)
      for (int64_t j = 0; j < 2; ++j) {
        Value prob = shiftedExp2(b, logits[2 * t + j], shift[half]);
        Value g =
            vector::ExtractOp::create(b, dp[t], ArrayRef<int64_t>{half, j});
        grads[t].push_back(arith::MulFOp::create(
            b, prob, arith::SubFOp::create(b, g, delta[half])));
      }
  }
  return grads;
}

SmallVector<Value> WarpQueryGrad::accumulate(ImplicitLocOpBuilder &b,
                                             ArrayRef<SmallVector<Value>> grads,
                                             Value keyTile,
                                             ValueRange dq) const {
  WarpFragments frags{lane, elem};
  SmallVector<Value> next(dq.begin(), dq.end());
  for (size_t u = 0; u < grads.size() / 2; ++u) {
    Value dsA = frags.accumulatorsAsA(b, {grads[2 * u], grads[2 * u + 1]});
    for (size_t t = 0; t < next.size(); ++t)
      next[t] = frags.accumulateKN(b, dsA, keyTile, indexConst(b, u * kMmaK),
                                   t * kMmaCols, next[t]);
  }
  return next;
}

void WarpQueryGrad::write(ImplicitLocOpBuilder &b, ArrayRef<Value> dq) const {
  Value out = e.arg("gradQueries");
  auto pairType = VectorType::get({2}, b.getF32Type());
  for (int64_t half = 0; half < 2; ++half) {
    auto [rowOfHalf, isHead] = headRow(b, half);
    Value row = rowOfHalf; // a lambda captures a variable, not a binding
    buildIfThen(b, isHead, [&](ImplicitLocOpBuilder &wb) {
      Value head = headOf(wb, row);
      for (size_t t = 0; t < dq.size(); ++t) {
        Value col = arith::AddIOp::create(
            wb, arith::MulIOp::create(wb, tig, indexConst(wb, 2)),
            indexConst(wb, kMmaCols * t));
        Value v = arith::MulFOp::create(
            wb, vector::ExtractOp::create(wb, dq[t], ArrayRef<int64_t>{half}),
            vector::BroadcastOp::create(
                wb, pairType, nanIfBroken(wb, keys, f32Const(wb, scale))));
        storeRow(wb, toElementsOf(wb, v, out), out, {batch, head, query, col});
      }
    });
  }
}

bool mlir::pisa::detail::queryGradInRegisters(Type elem, int64_t G, int64_t d,
                                              int64_t dv, int64_t c) {
  return elem.getIntOrFloatBitWidth() == 16 && G <= kMmaRows &&
         d % kMmaK == 0 && d <= 128 && dv % 32 == 0 && dv <= 128 &&
         (c == 16 || c == 32 || c == 64);
}

RegisterQueryGradPlan::RegisterQueryGradPlan(int64_t d, int64_t dv, int64_t c,
                                             int64_t topK)
    : headDim(d), valueDim(dv), blockSize(c), topK(topK) {
  queryOffset = llvm::alignTo(c * (d + kChunkElems) * 2, 16);
  warpBytes = queryOffset + llvm::alignTo(kMmaRows * (d + kChunkElems) * 2, 16);
  listOffset = kRegisterGradQueries * warpBytes;
  listBytes = llvm::alignTo(topK * 4, 16);
  bytes = listOffset + kRegisterGradQueries * listBytes;
}

namespace {

/// The kernel body (WarpPerQuery.h: a warp per query).
class WarpGradKernel : WarpPerQuery {
public:
  WarpGradKernel(ImplicitLocOpBuilder &b, const Kernel &e,
                 const RegisterQueryGradPlan &plan, int64_t groupSize,
                 int64_t kvHeads, float scale)
      : WarpPerQuery(b, e, kvHeads, plan.blockSize, plan.topK), plan(plan),
        G(groupSize), scale(scale) {
    Value slot = arith::MulIOp::create(b, warp, indexConst(b, plan.warpBytes));
    keyTile = tiles.viewAt(b, slot,
                           {plan.blockSize, plan.headDim + kChunkElems}, elem);
    queryTile = tiles.viewAt(
        b, arith::AddIOp::create(b, slot, indexConst(b, plan.queryOffset)),
        {kMmaRows, plan.headDim + kChunkElems}, elem);
    list = tiles.viewAt(
        b,
        arith::AddIOp::create(
            b, indexConst(b, plan.listOffset),
            arith::MulIOp::create(b, warp, indexConst(b, plan.listBytes))),
        {plan.topK}, b.getI32Type());
  }

  void build(ImplicitLocOpBuilder &b) {
    forEachQuery(b, kRegisterGradQueries,
                 [&](ImplicitLocOpBuilder &qb, Value q, Value batchRules) {
                   gradQuery(qb, q, batchRules);
                 });
  }

private:
  /// The warp's query: its list, its Q tile, dO's fragments, its rows'
  /// shifts and D, then every attended block in order, then dq.
  void gradQuery(ImplicitLocOpBuilder &b, Value q, Value batchRules) {
    Value count = beginQuery(b, q, batchRules, list);
    auto token = [&](ImplicitLocOpBuilder &, Value) { return query; };
    stageHeadRows(b,
                  {e.arg("queries"), batch,
                   arith::MulIOp::create(b, kv, indexConst(b, G)), G, kMmaRows,
                   token},
                  kMmaRows, plan.headDim, queryTile, lane, kLanes);
    LeafMmaQuery gradOut =
        loadLeafMmaQuery(b, e.arg("gradOutput"), site, G, plan.valueDim, lane);
    WarpQueryGrad rows(e, *this, query, arith::ConstantIntOp::create(b, 1, 1),
                       keys, G, plan.valueDim, scale);
    rows.beginRows(b);
    syncWarp(b); // the list and the Q tile are visible to the warp

    auto accType = VectorType::get({2, 2}, b.getF32Type());
    SmallVector<Value> init(
        plan.headDim / kMmaCols,
        arith::ConstantOp::create(b, accType, b.getZeroAttr(accType)));
    SmallVector<Value> dq = forEachEntry(
        b, list, count, init, plan.prefetchEntries, plan.headDim, plan.valueDim,
        [&](ImplicitLocOpBuilder &lb, Value j, ValueRange acc)
            -> SmallVector<Value> { return step(lb, rows, gradOut, j, acc); });
    rows.write(b, dq);
  }

  /// List entry j: dP while K's rows are copied into the warp's tile, then
  /// S, dS and dQ += dS K.
  SmallVector<Value> step(ImplicitLocOpBuilder &b, const WarpQueryGrad &rows,
                          const LeafMmaQuery &gradOut, Value j,
                          ValueRange acc) const {
    Entry entry = beginEntry(b, list, j, e.arg("keys"), keyTile, plan.headDim);
    SmallVector<Value> dp =
        gatherProducts(b, gradOut, e.arg("values"), entry, plan.valueDim);
    nvgpu::DeviceAsyncWaitOp::create(b, entry.copied, b.getI32IntegerAttr(0));
    syncWarp(b); // K is in the tile, seen by every lane
    WarpFragments frags{lane, elem};
    Value zero = indexConst(b, 0);
    SmallVector<Value> s =
        frags.productNT(b, queryTile, zero, keyTile, zero, plan.headDim,
                        plan.blockSize / kMmaCols);
    return rows.accumulate(b, rows.scoreGradients(b, s, dp, entry.visible),
                           keyTile, acc);
  }

  const RegisterQueryGradPlan &plan;
  int64_t G;
  float scale;
  Value keyTile, queryTile, list;
};

} // namespace

void mlir::pisa::detail::buildRegisterQueryGrad(
    ImplicitLocOpBuilder &b, const Kernel &kernel,
    const RegisterQueryGradPlan &plan, int64_t groupSize, int64_t kvHeads,
    float scale) {
  WarpGradKernel(b, kernel, plan, groupSize, kvHeads, scale).build(b);
}
