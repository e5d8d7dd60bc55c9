//===- QueryGradTiles.cpp - dq of sparse attention on query tiles ---------===//
//
// pisa.kernel.sparse_attention_grad_queries where a query's G heads fit one
// m16 tile (queryTileGradFits): a query tile (QueryTiles.h) of W
// consecutive queries (kernel_config union_queries, 4 by default), warp w
// owning query w's 16 head rows, over the union of their attended blocks;
// each warp whose query attends an entry:
//
//   S = Q K^T, dP = dO V^T      Q, dO and K, V fragments by ldmatrix
//   P = exp2(S scale log2 e - lse log2 e), dS = P (dP - D)
//   dQ += dS K                  dS's A fragments are the accumulators
//                               rounded in place, K by ldmatrix.trans
//
// with dQ in registers across the entries (WarpMma.h). A warp's sum runs in
// its query's block order, whatever the other queries attend: dq does not
// depend on the tile. D = dO . o per head row is computed first and
// written for the key kernel.
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionGrad.h"
#include "Attention/AttentionSteps.h"
#include "Attention/QueryTiles.h"
#include "Attention/SparseAttention.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/TileCopy.h"
#include "Kernels/WarpMma.h"
#include "Selection/LeafScoreMMA.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

using P = arith::CmpIPredicate;

bool mlir::pisa::detail::queryTileGradFits(Type elem, int64_t G, int64_t d,
                                           int64_t dv, int64_t c) {
  return elem.getIntOrFloatBitWidth() == 16 && G <= kMmaRows &&
         d % kMmaK == 0 && d <= 128 && dv % kMmaK == 0 &&
         (c == 16 || c == 32 || c == 64);
}

QueryTileGradPlan::QueryTileGradPlan(int64_t warps, int64_t d, int64_t dv,
                                     int64_t c, int64_t topK)
    : unionPlan(warps, d, dv, c, topK) {
  int64_t at = 0;
  unionPlan.placeBuffers(at);
  query = unionPlan.placeWarpRows(at, d);
  gradOut = unionPlan.placeWarpRows(at, dv);
  unionPlan.placeLists(at);
  bytes = at;
}

namespace {

class TileQueryGrad : QueryTile {
public:
  TileQueryGrad(ImplicitLocOpBuilder &b, const Kernel &e,
                const QueryTileGradPlan &plan, int64_t groupSize,
                int64_t kvHeads, float scale)
      : QueryTile(b, e, plan.unionPlan, groupSize, kvHeads), scale(scale) {
    queryTile = warpTile(b, plan.query);
    gradOutTile = warpTile(b, plan.gradOut);
  }

  void build(ImplicitLocOpBuilder &b) {
    runTile(
        b,
        [&](ImplicitLocOpBuilder &qb) {
          stageRows(qb, e.arg("queries"), p.headDim, queryTile);
          stageRows(qb, e.arg("gradOutput"), p.valueDim, gradOutTile);
        },
        [&](ImplicitLocOpBuilder &cb) {
          for (int64_t half = 0; half < 2; ++half) {
            Value row =
                arith::AddIOp::create(cb, gid, indexConst(cb, 8 * half));
            Value isHead = arith::AndIOp::create(
                cb, cmp(cb, P::ult, row, indexConst(cb, G)), hasQuery);
            Value head = headOf(cb, row);
            Value lse = memref::LoadOp::create(cb, e.arg("lse"),
                                               ValueRange{batch, head, query});
            shift[half] = probabilityShift(cb, lse, isHead);
            delta[half] = rowDelta(cb, head, isHead);
          }
          auto accType = VectorType::get({2, 2}, cb.getF32Type());
          SmallVector<Value> init(
              p.headDim / kMmaCols,
              arith::ConstantOp::create(cb, accType, cb.getZeroAttr(accType)));
          SmallVector<Value> dq =
              consumeUnion(cb, init,
                           [&](ImplicitLocOpBuilder &sb, Value firstKey,
                               Value kTile, Value vTile, ValueRange acc) {
                             return attend(sb, firstKey, kTile, vTile, acc);
                           });
          writeGradient(cb, dq);
        });
    gpu::ReturnOp::create(b);
  }

private:
  /// D = dO . o of head row `head` (0 for rows that are not heads): the
  /// lane sums its quarter of the row, then the quad; written for the key
  /// kernel.
  Value rowDelta(ImplicitLocOpBuilder &b, Value head, Value isHead) {
    const int64_t quarter = p.valueDim / 4;
    Type f32 = b.getF32Type();
    auto wide = VectorType::get({quarter}, f32);
    SmallVector<Value> at{
        batch, head, query,
        arith::MulIOp::create(b, tig, indexConst(b, quarter))};
    auto load = [&](Value src) -> Value {
      Value v = vector::LoadOp::create(b, VectorType::get({quarter}, elem), src,
                                       ValueRange(at));
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
        b,
        arith::AndIOp::create(b, isHead, cmp(b, P::eq, tig, indexConst(b, 0))),
        [&](ImplicitLocOpBuilder &wb) {
          memref::StoreOp::create(wb, d, e.arg("delta"),
                                  ValueRange{batch, head, query});
        });
    return d;
  }

  /// S, dP, P, dS and dQ += dS K for the block from `firstKey` in `kTile`
  /// and `vTile`.
  SmallVector<Value> attend(ImplicitLocOpBuilder &b, Value firstKey,
                            Value kTile, Value vTile, ValueRange acc) {
    const int64_t c = p.blockSize;
    WarpFragments frags{lane, elem};
    Value zero = indexConst(b, 0);
    SmallVector<Value> s = frags.productNT(b, queryTile, zero, kTile, zero,
                                           p.headDim, c / kMmaCols);
    SmallVector<Value> dp = frags.productNT(b, gradOutTile, zero, vTile, zero,
                                            p.valueDim, c / kMmaCols);
    Value visible = visibleKeys(b, firstKey);
    // grads[t]: n8 tile t's four dS values, [half * 2 + j].
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
    SmallVector<Value> next(acc.begin(), acc.end());
    for (int64_t u = 0; u < c / kMmaK; ++u) {
      Value dsA = frags.accumulatorsAsA(b, {grads[2 * u], grads[2 * u + 1]});
      for (size_t t = 0; t < next.size(); ++t)
        next[t] = frags.accumulateKN(b, dsA, kTile, indexConst(b, u * kMmaK),
                                     t * kMmaCols, next[t]);
    }
    return next;
  }

  /// dq = scale dQ for the warp's head rows.
  void writeGradient(ImplicitLocOpBuilder &b, ArrayRef<Value> dq) {
    Value out = e.arg("gradQueries");
    auto pairType = VectorType::get({2}, b.getF32Type());
    for (int64_t half = 0; half < 2; ++half) {
      Value row = arith::AddIOp::create(b, gid, indexConst(b, 8 * half));
      Value isHead = arith::AndIOp::create(
          b, cmp(b, P::ult, row, indexConst(b, G)), hasQuery);
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
          storeRow(wb, toElementsOf(wb, v, out), out,
                   {batch, head, query, col});
        }
      });
    }
  }

  float scale;
  Value queryTile, gradOutTile;
  Value shift[2], delta[2];
};

} // namespace

void mlir::pisa::detail::buildQueryTileGrad(ImplicitLocOpBuilder &b,
                                            const Kernel &kernel,
                                            const QueryTileGradPlan &plan,
                                            int64_t groupSize, int64_t kvHeads,
                                            float scale) {
  TileQueryGrad(b, kernel, plan, groupSize, kvHeads, scale).build(b);
}
