//===- WarpPerQuery.cpp - A warp per query over its own blocks ------------===//
//
// WarpPerQuery.h's pieces of the register attention and register dq
// kernels. A query's list of attended blocks is built by the whole warp
// (walkAttendedBlocksByWarp, SparseAttention.h).
//
//===----------------------------------------------------------------------===//

#include "Attention/WarpPerQuery.h"
#include "Kernels/TileCopy.h"
#include "Selection/QueryKernels.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/MathExtras.h"

#include <optional>

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
  return walkAttendedBlocksByWarp(
      b, e.arg("selection"), {batch, kv, query}, numKeys, keyEnd, blockSize,
      topK, lane, [&](ImplicitLocOpBuilder &wb, Value s32, Value at) {
        memref::StoreOp::create(wb, s32, list, at);
      });
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

void WarpPerQuery::prefetchEntryL2(ImplicitLocOpBuilder &b, Value list, Value j,
                                   Value count,
                                   ArrayRef<const L2Prefetch *> sources,
                                   ArrayRef<int64_t> rowBytes) const {
  buildIfThen(
      b, cmp(b, arith::CmpIPredicate::ult, j, count),
      [&](ImplicitLocOpBuilder &eb) {
        Value firstKey = arith::MulIOp::create(
            eb, toIndex(eb, memref::LoadOp::create(eb, list, j)),
            indexConst(eb, blockSize));
        // A lane a row: rows lane, lane + 32, ... of the block.
        buildLoop(
            eb, lane, indexConst(eb, blockSize), indexConst(eb, kLanes),
            ValueRange{},
            [&](ImplicitLocOpBuilder &lb, Value r,
                ValueRange) -> SmallVector<Value> {
              Value key = arith::AddIOp::create(lb, firstKey, r);
              buildIfThen(
                  lb, cmp(lb, arith::CmpIPredicate::ult, key, numKeys),
                  [&](ImplicitLocOpBuilder &kb) {
                    Value row = keys.row(kb, key);
                    for (auto [source, bytes] : llvm::zip(sources, rowBytes))
                      source->fetch(kb, {batch, kv, row, indexConst(kb, 0)},
                                    bytes);
                  });
              return {};
            });
      });
}

SmallVector<Value> WarpPerQuery::forEachEntry(
    ImplicitLocOpBuilder &b, Value list, Value count, ValueRange init,
    int64_t ahead, int64_t keyWidth, int64_t valueWidth,
    llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value,
                                          ValueRange)>
        body) const {
  // Later entries' rows asked of the L2: the products read one operand
  // straight from global memory, so a DRAM miss there stalls the warp.
  std::optional<L2Prefetch> keyRows, valueRows;
  if (ahead > 0) {
    keyRows.emplace(b, e.arg("keys"));
    valueRows.emplace(b, e.arg("values"));
  }
  const int64_t elemBytes = elem.getIntOrFloatBitWidth() / 8;
  return buildLoop(b, indexConst(b, 0), count, indexConst(b, 1), init,
                   [&](ImplicitLocOpBuilder &lb, Value j,
                       ValueRange state) -> SmallVector<Value> {
                     if (keyRows)
                       prefetchEntryL2(
                           lb, list,
                           arith::AddIOp::create(lb, j, indexConst(lb, ahead)),
                           count, {&*keyRows, &*valueRows},
                           {keyWidth * elemBytes, valueWidth * elemBytes});
                     return body(lb, j, state);
                   });
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
