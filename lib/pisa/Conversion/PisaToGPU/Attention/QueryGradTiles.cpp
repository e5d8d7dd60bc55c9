//===- QueryGradTiles.cpp - dq of sparse attention on query tiles ---------===//
//
// pisa.kernel.sparse_attention_grad_queries where a query's G heads fit one
// m16 tile (queryTileGradFits): a query tile (QueryTiles.h) of W
// consecutive queries (kernel_config union_queries), warp w
// owning query w's 16 head rows, over the union of their attended blocks;
// each warp whose query attends an entry:
//
//   S = Q K^T, dP = dO V^T      Q, dO and K, V fragments by ldmatrix
//   P = exp2(S scale log2 e - lse log2 e), dS = P (dP - D)
//   dQ += dS K                  dS's A fragments are the accumulators
//                               rounded in place, K by ldmatrix.trans
//
// with dQ in registers across the entries (WarpMma.h; the warp's pieces,
// D = dO . o per head row written for the key kernel first, are
// WarpQueryGrad.h's). A warp's sum runs in its query's block order,
// whatever the other queries attend: dq does not depend on the tile.
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionGrad.h"
#include "Attention/AttentionSteps.h"
#include "Attention/QueryTiles.h"
#include "Attention/SparseAttention.h"
#include "Attention/WarpQueryGrad.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/WarpMma.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

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
      : QueryTile(b, e, plan.unionPlan, groupSize, kvHeads),
        rows(e, *this, query, hasQuery, keys, groupSize,
             plan.unionPlan.valueDim, scale) {
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
          rows.beginRows(cb);
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
          rows.write(cb, dq);
        });
    gpu::ReturnOp::create(b);
  }

private:
  /// S, dP, dS and dQ += dS K for the block from `firstKey` in `kTile` and
  /// `vTile`.
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
    return rows.accumulate(b, rows.scoreGradients(b, s, dp, visible), kTile,
                           acc);
  }

  WarpQueryGrad rows;
  Value queryTile, gradOutTile;
};

} // namespace

void mlir::pisa::detail::buildQueryTileGrad(ImplicitLocOpBuilder &b,
                                            const Kernel &kernel,
                                            const QueryTileGradPlan &plan,
                                            int64_t groupSize, int64_t kvHeads,
                                            float scale) {
  TileQueryGrad(b, kernel, plan, groupSize, kvHeads, scale).build(b);
}
