//===- WarpPerQuery.cpp - A warp per query over its own blocks ------------===//
//
// WarpPerQuery.h's pieces of the register attention and register dq
// kernels. A query's list of attended blocks is built by the whole warp, 32
// selection entries at a time (a lane each), so that the entries' loads are
// issued together, not each after the one before.
//
//===----------------------------------------------------------------------===//

#include "Attention/WarpPerQuery.h"
#include "Kernels/TileCopy.h"
#include "Selection/LaneWalk.h"
#include "Selection/QueryKernels.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

WarpPerQuery::WarpPerQuery(ImplicitLocOpBuilder &b, const Kernel &e,
                           int64_t kvHeads, int64_t blockSize, int64_t topK)
    : ThreadPlace(b, kvHeads), e(e), blockSize(blockSize), topK(topK),
      tiles(b) {
  elem = cast<MemRefType>(e.arg("queries").getType()).getElementType();
}

void WarpPerQuery::forEachQuery(
    ImplicitLocOpBuilder &b, int64_t queriesPerBlock,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> body) {
  Value numQueries = dimOf(b, e.arg("queries"), 2);
  Value q = arith::AddIOp::create(
      b, arith::MulIOp::create(b, blockIdX(b), indexConst(b, queriesPerBlock)),
      warp);
  Value batchRules = packedBatchRules(b, e);
  buildIfThen(b, cmp(b, arith::CmpIPredicate::ult, q, numQueries),
              [&](ImplicitLocOpBuilder &qb) { body(qb, q, batchRules); });
  gpu::ReturnOp::create(b);
}

Value WarpPerQuery::beginQuery(ImplicitLocOpBuilder &b, Value q,
                               Value batchRules, Value list) {
  query = q;
  keys = queryKeysOf(b, e, query, batchRules);
  numKeys = keys.numKeys;
  Value position = keys.position;
  keyEnd = arith::MinUIOp::create(
      b, numKeys, arith::AddIOp::create(b, position, indexConst(b, 1)));
  site = QuerySite{batch, kv, query, position};
  return listBlocks(b, list);
}

Value WarpPerQuery::listBlocks(ImplicitLocOpBuilder &b, Value list) const {
  using P = arith::CmpIPredicate;
  auto i32Const = [](ImplicitLocOpBuilder &cb, int64_t v) -> Value {
    return arith::ConstantIntOp::create(cb, v, 32);
  };
  auto shuffle = [&](ImplicitLocOpBuilder &cb, Value v, int64_t at,
                     gpu::ShuffleMode mode) -> Value {
    return gpu::ShuffleOp::create(cb, v, i32Const(cb, at), i32Const(cb, kLanes),
                                  mode)
        .getShuffleResult();
  };
  Value numBlocks =
      arith::CeilDivUIOp::create(b, numKeys, indexConst(b, blockSize));
  Value lane32 = toI32(b, lane);
  // Chunks of 32 entries, lane l taking entry 32 c + l; the state: the
  // count so far and the largest valid entry of the chunks before.
  SmallVector<Value> state = buildLoop(
      b, indexConst(b, 0), indexConst(b, llvm::divideCeil(topK, kLanes)),
      indexConst(b, 1), ValueRange{indexConst(b, 0), i32Const(b, -1)},
      [&](ImplicitLocOpBuilder &lb, Value chunk,
          ValueRange st) -> SmallVector<Value> {
        Value count = st[0], last = st[1];
        Value entry = arith::AddIOp::create(
            lb, arith::MulIOp::create(lb, chunk, indexConst(lb, kLanes)), lane);
        Value s32 = memref::LoadOp::create(
            lb, e.arg("selection"),
            ValueRange{
                batch, kv, query,
                arith::MinUIOp::create(lb, entry, indexConst(lb, topK - 1))});
        Value s = toIndex(lb, s32);
        Value valid = arith::AndIOp::create(
            lb, cmp(lb, P::ult, entry, indexConst(lb, topK)),
            arith::AndIOp::create(lb, cmp(lb, P::sge, s, indexConst(lb, 0)),
                                  cmp(lb, P::slt, s, numBlocks)));
        // The largest valid entry up to this lane (an inclusive prefix max),
        // and before it.
        Value upTo = arith::SelectOp::create(lb, valid, s32, i32Const(lb, -1));
        for (int64_t k = 1; k < kLanes; k *= 2)
          upTo = arith::SelectOp::create(
              lb, arith::CmpIOp::create(lb, P::sge, lane32, i32Const(lb, k)),
              arith::MaxSIOp::create(
                  lb, upTo, shuffle(lb, upTo, k, gpu::ShuffleMode::UP)),
              upTo);
        Value before = arith::MaxSIOp::create(
            lb, last,
            arith::SelectOp::create(
                lb, arith::CmpIOp::create(lb, P::sge, lane32, i32Const(lb, 1)),
                shuffle(lb, upTo, 1, gpu::ShuffleMode::UP), i32Const(lb, -1)));
        Value used = arith::AndIOp::create(
            lb, valid, arith::CmpIOp::create(lb, P::sgt, s32, before));
        Value attended = arith::AndIOp::create(
            lb, used,
            cmp(lb, P::slt,
                arith::MulIOp::create(lb, s, indexConst(lb, blockSize)),
                keyEnd));
        Value mask = ballot(lb, attended);
        Value at = arith::AddIOp::create(
            lb, count, popCount(lb, bitsBelow(lb, mask, lane32)));
        buildIfThen(lb, attended, [&](ImplicitLocOpBuilder &wb) {
          memref::StoreOp::create(wb, s32, list, at);
        });
        return {arith::AddIOp::create(lb, count, popCount(lb, mask)),
                arith::MaxSIOp::create(
                    lb, last,
                    shuffle(lb, upTo, kLanes - 1, gpu::ShuffleMode::IDX))};
      });
  return state[0];
}

WarpPerQuery::Entry WarpPerQuery::beginEntry(ImplicitLocOpBuilder &b,
                                             Value list, Value j, Value source,
                                             Value tile, int64_t width) const {
  Entry entry;
  entry.firstKey =
      arith::MulIOp::create(b, toIndex(b, memref::LoadOp::create(b, list, j)),
                            indexConst(b, blockSize));
  syncWarp(b);
  // 16 bytes a copy, through L1 (cp.async.ca): the block's other queries
  // copy many of the same blocks at about the same time.
  ChunkedTile chunks{blockSize, width, kLanes};
  Value lastKey = arith::SubIOp::create(b, numKeys, indexConst(b, 1));
  auto chunkAt = [&](ImplicitLocOpBuilder &cb, Value i) -> AsyncChunk {
    Value row = chunks.row(cb, i), col = chunks.column(cb, i);
    Value key = arith::AddIOp::create(cb, entry.firstKey, row);
    Value real = cmp(cb, arith::CmpIPredicate::ult, key, numKeys);
    Value srcElements = arith::SelectOp::create(
        cb, real, indexConst(cb, kChunkElems), indexConst(cb, 0));
    return {tile,
            {row, col},
            source,
            {batch, kv, keys.row(cb, arith::MinUIOp::create(cb, key, lastKey)),
             col},
            srcElements};
  };
  entry.copied = asyncCopyChunks(b, chunks, lane, chunkAt, /*bypassL1=*/false);
  entry.visible = arith::MinUIOp::create(
      b, arith::SubIOp::create(b, keyEnd, entry.firstKey),
      indexConst(b, blockSize));
  return entry;
}

SmallVector<Value> WarpPerQuery::gatherProducts(ImplicitLocOpBuilder &b,
                                                const LeafMmaQuery &a,
                                                Value source,
                                                const Entry &entry,
                                                int64_t width) const {
  ChildLevel rows{indexConst(b, 0), numKeys, indexConst(b, 1),
                  indexConst(b, 1)};
  return buildKeyTileProducts(b, a, source, site, rows,
                              keys.row(b, entry.firstKey), entry.visible,
                              blockSize, width);
}

void WarpPerQuery::syncWarp(ImplicitLocOpBuilder &b) {
  NVVM::SyncWarpOp::create(b, arith::ConstantIntOp::create(b, -1, 32));
}
