//===- QueryTileAttention.cpp - Sparse attention on query tiles -----------===//
//
// pisa.kernel.sparse_attention on query tiles (QueryTiles.h): W
// consecutive queries a block, warp w owning query w's 16 head rows, the
// union of their attended blocks staged once in shared memory; each warp
// whose query attends an entry, FlashAttention-2 style:
//
//   S = Q K^T           Q and K fragments by ldmatrix (WarpMma.h)
//   softmax             online, per head row, on S's accumulators
//   O = O alpha + P V   P's A fragments are the accumulators rounded in
//                       place, V by ldmatrix.trans
//
// with the row's max, sum and O in registers across the entries; each row
// ends divided by its sum, with its lse. Against the register kernel
// (AttentionInRegisters.cpp), which gathers each query's blocks from L2 per
// query, a block the tile's queries share is read once.
//
//===----------------------------------------------------------------------===//

#include "Attention/QueryTiles.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/WarpMma.h"
#include "Selection/LeafScoreMMA.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

using P = arith::CmpIPredicate;

bool mlir::pisa::detail::attendsOnQueryTiles(Type elem, int64_t G, int64_t d,
                                             int64_t dv, int64_t c) {
  return elem.getIntOrFloatBitWidth() == 16 && G <= kMmaRows &&
         d % kMmaK == 0 && d <= 128 && dv % kMmaCols == 0 && dv <= 128 &&
         (c == 16 || c == 32 || c == 64);
}

QueryTileAttentionPlan::QueryTileAttentionPlan(int64_t warps, int64_t d,
                                               int64_t dv, int64_t c,
                                               int64_t topK)
    : unionPlan(warps, d, dv, c, topK) {
  int64_t at = 0;
  unionPlan.placeBuffers(at);
  query = unionPlan.placeWarpRows(at, d);
  unionPlan.placeLists(at);
  bytes = at;
}

namespace {

class TileAttention : QueryTile {
public:
  TileAttention(ImplicitLocOpBuilder &b, const Kernel &e,
                const QueryTileAttentionPlan &plan, int64_t groupSize,
                int64_t kvHeads, float scale)
      : QueryTile(b, e, plan.unionPlan, groupSize, kvHeads), scale(scale) {
    queryTile = warpTile(b, plan.query);
  }

  void build(ImplicitLocOpBuilder &b) {
    const float negInf = -std::numeric_limits<float>::infinity();
    runTile(
        b,
        [&](ImplicitLocOpBuilder &qb) {
          stageRows(qb, e.arg("queries"), p.headDim, queryTile);
        },
        [&](ImplicitLocOpBuilder &cb) {
          // State: max and sum of rows g and g + 8 (the sums this lane's
          // columns' share), then O's accumulators, one per n8 tile of dv.
          auto accType = VectorType::get({2, 2}, cb.getF32Type());
          SmallVector<Value> init{f32Const(cb, negInf), f32Const(cb, negInf),
                                  f32Const(cb, 0.0f), f32Const(cb, 0.0f)};
          for (int64_t t = 0; t < p.valueDim / kMmaCols; ++t)
            init.push_back(arith::ConstantOp::create(cb, accType,
                                                     cb.getZeroAttr(accType)));
          SmallVector<Value> state =
              consumeUnion(cb, init,
                           [&](ImplicitLocOpBuilder &sb, Value firstKey,
                               Value kTile, Value vTile, ValueRange st) {
                             return attend(sb, firstKey, kTile, vTile, st);
                           });
          writeRows(cb, state);
        });
    gpu::ReturnOp::create(b);
  }

private:
  /// S, the online softmax and O = O alpha + P V for the block from
  /// `firstKey` in `kTile` and `vTile`.
  SmallVector<Value> attend(ImplicitLocOpBuilder &b, Value firstKey,
                            Value kTile, Value vTile, ValueRange st) const {
    const int64_t c = p.blockSize;
    WarpFragments frags{lane, elem};
    Value zero = indexConst(b, 0);
    SmallVector<Value> s = frags.productNT(b, queryTile, zero, kTile, zero,
                                           p.headDim, c / kMmaCols);
    Value visible = visibleKeys(b, firstKey);
    SmallVector<Value> next(st.begin(), st.end());
    // probs[t]: n8 tile t's four probabilities, [half * 2 + j].
    SmallVector<SmallVector<Value>> probs(s.size());
    Value alpha[2];
    for (int64_t half = 0; half < 2; ++half) {
      SmallVector<Value> logits = rowLogits(b, s, half, lane, visible, scale);
      Value oldMax = st[half];
      auto [newMax, shift] = onlineMaxStep(b, oldMax, quadRowMax(b, logits));
      Value sum = f32Const(b, 0.0f);
      for (size_t t = 0; t < s.size(); ++t)
        for (int64_t j = 0; j < 2; ++j) {
          Value prob = shiftedExp2(b, logits[2 * t + j], shift);
          probs[t].push_back(prob);
          sum = arith::AddFOp::create(b, sum, prob);
        }
      alpha[half] = rescaleFactor(b, oldMax, shift);
      next[half] = newMax;
      next[2 + half] = rescaledSum(b, st[2 + half], alpha[half], sum);
    }
    auto accType = VectorType::get({2, 2}, b.getF32Type());
    Value alphaTile = vector::FromElementsOp::create(
        b, accType, ValueRange{alpha[0], alpha[0], alpha[1], alpha[1]});
    SmallVector<Value> pFrags;
    for (int64_t u = 0; u < c / kMmaK; ++u)
      pFrags.push_back(
          frags.accumulatorsAsA(b, {probs[2 * u], probs[2 * u + 1]}));
    for (int64_t t = 0; t < p.valueDim / kMmaCols; ++t) {
      Value o = arith::MulFOp::create(b, st[4 + t], alphaTile);
      for (int64_t u = 0; u < c / kMmaK; ++u)
        o = frags.accumulateKN(b, pFrags[u], vTile, indexConst(b, u * kMmaK),
                               t * kMmaCols, o);
      next[4 + t] = o;
    }
    return next;
  }

  /// o = O / sum and lse = ln 2 (max + log2 sum) for the warp's head rows
  /// (0 and -inf without keys; NaN for a broken packed batch).
  void writeRows(ImplicitLocOpBuilder &b, ValueRange st) {
    Value out = e.arg("output");
    auto pairType = VectorType::get({2}, b.getF32Type());
    for (int64_t half = 0; half < 2; ++half) {
      Value sum = st[2 + half];
      for (int64_t offset : kQuadLanes)
        sum = arith::AddFOp::create(b, sum, shuffleXor(b, sum, offset));
      std::pair<Value, Value> end =
          brokenBatchAsNaN(b, keys, rowEnd(b, st[half], sum));
      Value inverse = end.first, lse = end.second;
      Value row = arith::AddIOp::create(b, gid, indexConst(b, 8 * half));
      Value isHead = arith::AndIOp::create(
          b, cmp(b, P::ult, row, indexConst(b, G)), hasQuery);
      buildIfThen(b, isHead, [&](ImplicitLocOpBuilder &wb) {
        Value head = headOf(wb, row);
        Value factor = vector::BroadcastOp::create(wb, pairType, inverse);
        for (int64_t t = 0; t < p.valueDim / kMmaCols; ++t) {
          Value col = arith::AddIOp::create(
              wb, arith::MulIOp::create(wb, tig, indexConst(wb, 2)),
              indexConst(wb, kMmaCols * t));
          Value v = arith::MulFOp::create(
              wb,
              vector::ExtractOp::create(wb, st[4 + t], ArrayRef<int64_t>{half}),
              factor);
          storeRow(wb, toElementsOf(wb, v, out), out,
                   {batch, head, query, col});
        }
        buildIfThen(wb, cmp(wb, P::eq, tig, indexConst(wb, 0)),
                    [&](ImplicitLocOpBuilder &lb) {
                      memref::StoreOp::create(lb, lse, e.arg("lse"),
                                              ValueRange{batch, head, query});
                    });
      });
    }
  }

  float scale;
  Value queryTile;
};

} // namespace

void mlir::pisa::detail::buildQueryTileAttention(
    ImplicitLocOpBuilder &b, const Kernel &kernel,
    const QueryTileAttentionPlan &plan, int64_t groupSize, int64_t kvHeads,
    float scale) {
  TileAttention(b, kernel, plan, groupSize, kvHeads, scale).build(b);
}
