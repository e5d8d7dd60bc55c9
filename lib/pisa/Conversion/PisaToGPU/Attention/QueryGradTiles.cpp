//===- QueryGradTiles.cpp - dq of sparse attention on query tiles ---------===//
//
// pisa.kernel.sparse_attention_grad_queries where a query's G heads fit one
// m16 tile (queryTileGradFits): one block of four warps per four
// consecutive queries of a batch x KV head (a query tile), warp w owning
// query w's 16 head rows. The block attends the union of its queries'
// attended blocks, in block order (each query's list is ascending: the
// union is a merge), so that a block two of them attend is read once:
//
//   per union entry, its keys and values copied by cp.async into one of
//   two buffers while the previous entry is computed; then each warp whose
//   query attends it:
//     S = Q K^T, dP = dO V^T      Q, dO and K, V fragments by ldmatrix
//     P = exp2(S scale log2 e - lse log2 e), dS = P (dP - D)
//     dQ += dS K                  dS's A fragments are the accumulators
//                                 rounded in place, K by ldmatrix.trans
//
// with dQ in registers across the entries (WarpMma.h). A warp's sum runs in
// its query's block order, whatever the other queries attend: dq does not
// depend on the tile. D = dO . o per head row is computed first and
// written for the key kernel.
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionGrad.h"
#include "Attention/AttentionSteps.h"
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

namespace {
int64_t up16(int64_t bytes) { return (bytes + 15) / 16 * 16; }
} // namespace

bool mlir::pisa::detail::queryTileGradFits(Type elem, int64_t G, int64_t d,
                                           int64_t dv, int64_t c) {
  return elem.getIntOrFloatBitWidth() == 16 && G <= kMmaRows &&
         d % kMmaK == 0 && d <= 128 && dv % kMmaK == 0 &&
         (c == 16 || c == 32 || c == 64);
}

QueryTileGradPlan::QueryTileGradPlan(int64_t d, int64_t dv, int64_t c,
                                     int64_t topK)
    : headDim(d), valueDim(dv), blockSize(c), topK(topK) {
  int64_t at = 0;
  for (int64_t i = 0; i < 2; ++i) {
    key[i] = SharedTiles::place(at, c * (d + 8) * 2);
    value[i] = SharedTiles::place(at, c * (dv + 8) * 2);
  }
  queryBytes = up16(kMmaRows * (d + 8) * 2);
  gradOutBytes = up16(kMmaRows * (dv + 8) * 2);
  query = SharedTiles::place(at, kGradWarps * queryBytes);
  gradOut = SharedTiles::place(at, kGradWarps * gradOutBytes);
  lists = SharedTiles::place(at, kGradWarps * topK * 4);
  counts = SharedTiles::place(at, kGradWarps * 4);
  unionList = SharedTiles::place(at, kGradWarps * topK * 4);
  unionMask = SharedTiles::place(at, kGradWarps * topK * 4);
  unionCount = SharedTiles::place(at, 4);
  bytes = at;
}

namespace {

class TileQueryGrad {
public:
  TileQueryGrad(ImplicitLocOpBuilder &b, const Kernel &e,
                const QueryTileGradPlan &plan, int64_t groupSize,
                int64_t kvHeads, float scale)
      : e(e), p(plan), G(groupSize), scale(scale), tiles(b) {
    elem = cast<MemRefType>(e.arg("queries").getType()).getElementType();
    Type i32 = b.getI32Type();
    batch = arith::DivUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
    kv = arith::RemUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
    tid = threadIdX(b);
    warp = arith::DivUIOp::create(b, tid, indexConst(b, 32));
    lane = arith::RemUIOp::create(b, tid, indexConst(b, 32));
    gid = arith::DivUIOp::create(b, lane, indexConst(b, 4));
    tig = arith::RemUIOp::create(b, lane, indexConst(b, 4));
    keyRows = dimOf(b, e.arg("keys"), 2);
    Value numQueries = dimOf(b, e.arg("queries"), 2);
    query = arith::AddIOp::create(
        b, arith::MulIOp::create(b, blockIdX(b), indexConst(b, kGradWarps)),
        warp);
    hasQuery = cmp(b, P::ult, query, numQueries);
    // A warp past Nq reads the last query (in bounds) and writes nothing.
    query = arith::MinUIOp::create(
        b, query, arith::SubIOp::create(b, numQueries, indexConst(b, 1)));
    keys = queryKeysOf(b, e, query, packedBatchRules(b, e));
    numKeys = keys.numKeys;
    keyEnd = arith::MinUIOp::create(
        b, numKeys, arith::AddIOp::create(b, keys.position, indexConst(b, 1)));
    // In a packed batch the lists hold first key rows (blocks of different
    // sequences differ there), else block indices.
    packed = e.has("cuSeqlensQ");
    const int64_t d = p.headDim, dv = p.valueDim, c = p.blockSize;
    for (int64_t i = 0; i < 2; ++i) {
      keyTile[i] = tiles.view(b, p.key[i], {c, d + 8}, elem);
      valueTile[i] = tiles.view(b, p.value[i], {c, dv + 8}, elem);
    }
    queryTile = tiles.viewAt(
        b,
        arith::AddIOp::create(
            b, indexConst(b, p.query),
            arith::MulIOp::create(b, warp, indexConst(b, p.queryBytes))),
        {kMmaRows, d + 8}, elem);
    gradOutTile = tiles.viewAt(
        b,
        arith::AddIOp::create(
            b, indexConst(b, p.gradOut),
            arith::MulIOp::create(b, warp, indexConst(b, p.gradOutBytes))),
        {kMmaRows, dv + 8}, elem);
    lists = tiles.view(b, p.lists, {kGradWarps, p.topK}, i32);
    counts = tiles.view(b, p.counts, {kGradWarps}, i32);
    unionList = tiles.view(b, p.unionList, {kGradWarps * p.topK}, i32);
    unionMask = tiles.view(b, p.unionMask, {kGradWarps * p.topK}, i32);
    unionCount = tiles.view(b, p.unionCount, {1}, i32);
  }

  void build(ImplicitLocOpBuilder &b) {
    listBlocks(b);
    stageRows(b, e.arg("queries"), p.headDim, queryTile);
    stageRows(b, e.arg("gradOutput"), p.valueDim, gradOutTile);
    for (int64_t half = 0; half < 2; ++half) {
      Value row = arith::AddIOp::create(b, gid, indexConst(b, 8 * half));
      Value isHead = arith::AndIOp::create(
          b, cmp(b, P::ult, row, indexConst(b, G)), hasQuery);
      Value head = headOf(b, row);
      Value lse = memref::LoadOp::create(b, e.arg("lse"),
                                         ValueRange{batch, head, query});
      shift[half] = probabilityShift(b, lse, isHead);
      delta[half] = rowDelta(b, head, isHead);
    }
    gpu::BarrierOp::create(b); // the lists and row tiles are written
    mergeLists(b);
    gpu::BarrierOp::create(b);
    Value count =
        toIndex(b, memref::LoadOp::create(b, unionCount, indexConst(b, 0)));
    buildIfThen(b, cmp(b, P::ugt, count, indexConst(b, 0)),
                [&](ImplicitLocOpBuilder &tb) {
                  copyEntry(tb, indexConst(tb, 0), indexConst(tb, 0));
                });
    auto accType = VectorType::get({2, 2}, b.getF32Type());
    SmallVector<Value> init(
        p.headDim / kMmaCols,
        arith::ConstantOp::create(b, accType, b.getZeroAttr(accType)));
    SmallVector<Value> dq =
        buildLoop(b, indexConst(b, 0), count, init,
                  [&](ImplicitLocOpBuilder &lb, Value u, ValueRange acc) {
                    return step(lb, u, count, acc);
                  });
    writeGradient(b, dq);
    gpu::ReturnOp::create(b);
  }

private:
  /// The first key row of union entry `entry`.
  Value entryFirstRow(ImplicitLocOpBuilder &b, Value entry) const {
    Value stored = toIndex(b, memref::LoadOp::create(b, unionList, entry));
    if (packed)
      return stored;
    return arith::MulIOp::create(b, stored, indexConst(b, p.blockSize));
  }

  Value headOf(ImplicitLocOpBuilder &b, Value row) const {
    return arith::AddIOp::create(
        b, arith::MulIOp::create(b, kv, indexConst(b, G)),
        arith::MinUIOp::create(b, row, indexConst(b, G - 1)));
  }

  /// Lane 0 of each warp lists the blocks its query attends (ascending, by
  /// the forward's rule) and their count.
  void listBlocks(ImplicitLocOpBuilder &b) {
    Type index = b.getIndexType();
    buildIfThen(
        b, cmp(b, P::eq, lane, indexConst(b, 0)),
        [&](ImplicitLocOpBuilder &lb) {
          Value n = buildIf(
              lb, hasQuery, TypeRange{index},
              [&](ImplicitLocOpBuilder &qb) -> SmallVector<Value> {
                return {walkAttendedBlocks(
                    qb, e.arg("selection"), {batch, kv, query}, numKeys, keyEnd,
                    p.blockSize, p.topK,
                    [&](ImplicitLocOpBuilder &wb, Value attended, Value s32,
                        Value at) {
                      buildIfThen(wb, attended, [&](ImplicitLocOpBuilder &sb) {
                        Value entry = s32;
                        if (packed)
                          entry = toI32(
                              sb,
                              keys.row(sb, arith::MulIOp::create(
                                               sb, toIndex(sb, s32),
                                               indexConst(sb, p.blockSize))));
                        memref::StoreOp::create(sb, entry, lists,
                                                ValueRange{warp, at});
                      });
                    })};
              },
              [&](ImplicitLocOpBuilder &nb) -> SmallVector<Value> {
                return {indexConst(nb, 0)};
              })[0];
          memref::StoreOp::create(lb, toI32(lb, n), counts, warp);
        });
  }

  /// Thread 0 merges the warps' lists into the union (ascending, each
  /// block once) with, per entry, the mask of the warps that attend it.
  void mergeLists(ImplicitLocOpBuilder &b) {
    buildIfThen(
        b, cmp(b, P::eq, tid, indexConst(b, 0)), [&](ImplicitLocOpBuilder &tb) {
          SmallVector<Value> ends, init;
          for (int64_t w = 0; w < kGradWarps; ++w) {
            ends.push_back(toIndex(
                tb, memref::LoadOp::create(tb, counts, indexConst(tb, w))));
            init.push_back(indexConst(tb, 0));
          }
          init.push_back(indexConst(tb, 0));
          const int32_t none = std::numeric_limits<int32_t>::max();
          SmallVector<Value> out = buildLoop(
              tb, indexConst(tb, 0), indexConst(tb, kGradWarps * p.topK), init,
              [&](ImplicitLocOpBuilder &lb, Value, ValueRange st) {
                SmallVector<Value> heads;
                Value least = arith::ConstantIntOp::create(lb, none, 32);
                for (int64_t w = 0; w < kGradWarps; ++w) {
                  Value at = arith::MinUIOp::create(lb, st[w],
                                                    indexConst(lb, p.topK - 1));
                  Value h = arith::SelectOp::create(
                      lb, cmp(lb, P::ult, st[w], ends[w]),
                      memref::LoadOp::create(lb, lists,
                                             ValueRange{indexConst(lb, w), at}),
                      arith::ConstantIntOp::create(lb, none, 32));
                  heads.push_back(h);
                  least = arith::MinSIOp::create(lb, least, h);
                }
                Value any = arith::CmpIOp::create(
                    lb, P::ne, least,
                    arith::ConstantIntOp::create(lb, none, 32));
                Value mask = arith::ConstantIntOp::create(lb, 0, 32);
                SmallVector<Value> next;
                for (int64_t w = 0; w < kGradWarps; ++w) {
                  Value takes = arith::AndIOp::create(
                      lb, any,
                      arith::CmpIOp::create(lb, P::eq, heads[w], least));
                  mask = arith::OrIOp::create(
                      lb, mask,
                      arith::SelectOp::create(
                          lb, takes,
                          arith::ConstantIntOp::create(lb, 1 << w, 32),
                          arith::ConstantIntOp::create(lb, 0, 32)));
                  next.push_back(arith::SelectOp::create(
                      lb, takes,
                      arith::AddIOp::create(lb, st[w], indexConst(lb, 1)),
                      st[w]));
                }
                Value n = st[kGradWarps];
                buildIfThen(lb, any, [&](ImplicitLocOpBuilder &sb) {
                  memref::StoreOp::create(sb, least, unionList, n);
                  memref::StoreOp::create(sb, mask, unionMask, n);
                });
                next.push_back(arith::SelectOp::create(
                    lb, any, arith::AddIOp::create(lb, n, indexConst(lb, 1)),
                    n));
                return next;
              });
          memref::StoreOp::create(tb, toI32(tb, out[kGradWarps]), unionCount,
                                  indexConst(tb, 0));
        });
  }

  /// The warp's query's 16 head rows of `source` into its tile (rows past
  /// G, and every row of a warp past Nq, zeros).
  void stageRows(ImplicitLocOpBuilder &b, Value source, int64_t width,
                 Value tile) {
    ChunkedTile chunks{kMmaRows, width, 32};
    copyChunks(
        b, chunks, lane,
        [&](ImplicitLocOpBuilder &lb, Value i) -> Value {
          Value r = chunks.row(lb, i);
          Value v = vector::LoadOp::create(
              lb, VectorType::get({kChunkElems}, elem), source,
              ValueRange{batch, headOf(lb, r), query, chunks.column(lb, i)},
              false, llvm::MaybeAlign(16));
          Value keep = arith::AndIOp::create(
              lb, cmp(lb, P::ult, r, indexConst(lb, G)), hasQuery);
          auto type = VectorType::get({kChunkElems}, elem);
          Value zero = arith::ConstantOp::create(
              lb, type, DenseElementsAttr::get(type, lb.getZeroAttr(elem)));
          return arith::SelectOp::create(lb, keep, v, zero);
        },
        [&](ImplicitLocOpBuilder &lb, Value i, Value v) {
          vector::StoreOp::create(
              lb, v, tile, ValueRange{chunks.row(lb, i), chunks.column(lb, i)},
              false, llvm::MaybeAlign(16));
        });
  }

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

  /// Union entry `entry`'s keys and values into buffer `slot` mod 2 by
  /// cp.async, the whole block taking part: two copy groups.
  void copyEntry(ImplicitLocOpBuilder &b, Value entry, Value slot) {
    Value parity = arith::RemUIOp::create(b, slot, indexConst(b, 2));
    Value firstKey = entryFirstRow(b, entry);
    // Rows past the entry's sequence (the next one's, or zeros past the
    // buffer) are masked by each warp's visible count.
    Value lastKey = arith::SubIOp::create(b, keyRows, indexConst(b, 1));
    auto copy = [&](Value source, int64_t width, Value tile0, Value tile1) {
      ChunkedTile tile{p.blockSize, width, kGradThreads};
      asyncCopyChunks(
          b, tile, tid,
          [&](ImplicitLocOpBuilder &cb, Value i) -> AsyncChunk {
            Value row = tile.row(cb, i), col = tile.column(cb, i);
            Value key = arith::AddIOp::create(cb, firstKey, row);
            Value real = cmp(cb, P::ult, key, keyRows);
            Value srcElements = arith::SelectOp::create(
                cb, real, indexConst(cb, kChunkElems), indexConst(cb, 0));
            Value dst = buildIf(
                cb, cmp(cb, P::eq, parity, indexConst(cb, 0)),
                TypeRange{tile0.getType()},
                [&](ImplicitLocOpBuilder &) -> SmallVector<Value> {
                  return {tile0};
                },
                [&](ImplicitLocOpBuilder &) -> SmallVector<Value> {
                  return {tile1};
                })[0];
            return {dst,
                    {row, col},
                    source,
                    {batch, kv, arith::MinUIOp::create(cb, key, lastKey), col},
                    srcElements};
          },
          /*bypassL1=*/false);
    };
    copy(e.arg("keys"), p.headDim, keyTile[0], keyTile[1]);
    copy(e.arg("values"), p.valueDim, valueTile[0], valueTile[1]);
  }

  /// Union entry u: the next entry's copies issued, this one's awaited,
  /// then the warps whose query attends it.
  SmallVector<Value> step(ImplicitLocOpBuilder &b, Value u, Value count,
                          ValueRange acc) {
    Value next = arith::MinUIOp::create(
        b, arith::AddIOp::create(b, u, indexConst(b, 1)),
        arith::SubIOp::create(b, count, indexConst(b, 1)));
    // The last entry copies itself again into the other buffer: every
    // step issues two groups, so waiting for all but two is this entry's.
    copyEntry(b, next, arith::AddIOp::create(b, u, indexConst(b, 1)));
    NVVM::CpAsyncWaitGroupOp::create(b, 2);
    gpu::BarrierOp::create(b); // entry u's tiles are visible
    Value mask = memref::LoadOp::create(b, unionMask, u);
    Value mine = arith::CmpIOp::create(
        b, P::ne,
        arith::AndIOp::create(
            b, mask,
            arith::ShLIOp::create(b, arith::ConstantIntOp::create(b, 1, 32),
                                  toI32(b, warp))),
        arith::ConstantIntOp::create(b, 0, 32));
    Value parity = arith::RemUIOp::create(b, u, indexConst(b, 2));
    SmallVector<Value> out = buildIf(
        b, mine, ValueRange(acc).getTypes(),
        [&](ImplicitLocOpBuilder &tb) {
          Value firstKey = entryFirstRow(tb, u);
          return buildIf(
              tb, cmp(tb, P::eq, parity, indexConst(tb, 0)),
              ValueRange(acc).getTypes(),
              [&](ImplicitLocOpBuilder &eb) {
                return attend(eb, firstKey, keyTile[0], valueTile[0], acc);
              },
              [&](ImplicitLocOpBuilder &ob) {
                return attend(ob, firstKey, keyTile[1], valueTile[1], acc);
              });
        },
        [&](ImplicitLocOpBuilder &) {
          return SmallVector<Value>(acc.begin(), acc.end());
        });
    gpu::BarrierOp::create(b); // the buffer is read before it is refilled
    return out;
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
    Value visible = arith::MinUIOp::create(
        b, arith::SubIOp::create(b, keys.row(b, keyEnd), firstKey),
        indexConst(b, c));
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
    // The last step's copy of its entry again is not left in flight.
    NVVM::CpAsyncWaitGroupOp::create(b, 0);
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

  const Kernel &e;
  const QueryTileGradPlan &p;
  int64_t G;
  float scale;
  SharedTiles tiles;
  Type elem;
  Value keyTile[2], valueTile[2], queryTile, gradOutTile, lists, counts,
      unionList, unionMask, unionCount;
  Value shift[2], delta[2];
  QueryKeys keys;
  bool packed;
  Value batch, kv, tid, warp, lane, gid, tig, keyRows, numKeys, query, hasQuery,
      keyEnd;
};

} // namespace

void mlir::pisa::detail::buildQueryTileGrad(ImplicitLocOpBuilder &b,
                                            const Kernel &kernel,
                                            const QueryTileGradPlan &plan,
                                            int64_t groupSize, int64_t kvHeads,
                                            float scale) {
  TileQueryGrad(b, kernel, plan, groupSize, kvHeads, scale).build(b);
}
