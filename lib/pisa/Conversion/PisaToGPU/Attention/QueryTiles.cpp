//===- QueryTiles.cpp - Query tiles attending the union of their blocks ---===//
//
// The union steps the query-tile kernels share (QueryTiles.h).
//
//===----------------------------------------------------------------------===//

#include "Attention/QueryTiles.h"
#include "Kernels/TileCopy.h"
#include "Kernels/WarpMma.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

using P = arith::CmpIPredicate;

QueryTileUnionPlan::QueryTileUnionPlan(int64_t warps, int64_t d, int64_t dv,
                                       int64_t c, int64_t topK)
    : warps(warps), headDim(d), valueDim(dv), blockSize(c), topK(topK) {}

void QueryTileUnionPlan::placeBuffers(int64_t &at) {
  for (int64_t i = 0; i < 2; ++i) {
    key[i] = SharedTiles::place(at, blockSize * (headDim + 8) * 2);
    value[i] = SharedTiles::place(at, blockSize * (valueDim + 8) * 2);
  }
}

void QueryTileUnionPlan::placeLists(int64_t &at) {
  lists = SharedTiles::place(at, warps * topK * 4);
  counts = SharedTiles::place(at, warps * 4);
  unionList = SharedTiles::place(at, warps * topK * 4);
  unionMask = SharedTiles::place(at, warps * topK * 4);
  unionCount = SharedTiles::place(at, 4);
}

QueryTile::QueryTile(ImplicitLocOpBuilder &b, const Kernel &e,
                     const QueryTileUnionPlan &plan, int64_t groupSize,
                     int64_t kvHeads)
    : ThreadPlace(b, kvHeads), e(e), p(plan), G(groupSize), tiles(b) {
  elem = cast<MemRefType>(e.arg("queries").getType()).getElementType();
  Type i32 = b.getI32Type();
  keyRows = dimOf(b, e.arg("keys"), 2);
  Value numQueries = dimOf(b, e.arg("queries"), 2);
  query = arith::AddIOp::create(
      b, arith::MulIOp::create(b, blockIdX(b), indexConst(b, p.warps)), warp);
  hasQuery = cmp(b, P::ult, query, numQueries);
  // A warp past Nq reads the last query (in bounds) and writes nothing.
  query = arith::MinUIOp::create(
      b, query, arith::SubIOp::create(b, numQueries, indexConst(b, 1)));
  keys = queryKeysOf(b, e, query, packedBatchRules(b, e));
  numKeys = keys.numKeys;
  keyEnd = arith::MinUIOp::create(
      b, numKeys, arith::AddIOp::create(b, keys.position, indexConst(b, 1)));
  packed = e.has("cuSeqlensQ");
  const int64_t d = p.headDim, dv = p.valueDim, c = p.blockSize;
  for (int64_t i = 0; i < 2; ++i) {
    keyTile[i] = tiles.view(b, p.key[i], {c, d + 8}, elem);
    valueTile[i] = tiles.view(b, p.value[i], {c, dv + 8}, elem);
  }
  lists = tiles.view(b, p.lists, {p.warps, p.topK}, i32);
  counts = tiles.view(b, p.counts, {p.warps}, i32);
  unionList = tiles.view(b, p.unionList, {p.warps * p.topK}, i32);
  unionMask = tiles.view(b, p.unionMask, {p.warps * p.topK}, i32);
  unionCount = tiles.view(b, p.unionCount, {1}, i32);
}

QueryTileUnionPlan::WarpRows
QueryTileUnionPlan::placeWarpRows(int64_t &at, int64_t width) const {
  const int64_t bytes = llvm::alignTo(kMmaRows * (width + 8) * 2, 16);
  return {SharedTiles::place(at, warps * bytes), bytes, width};
}

Value QueryTile::warpTile(ImplicitLocOpBuilder &b,
                          const QueryTileUnionPlan::WarpRows &rows) const {
  return tiles.viewAt(
      b,
      arith::AddIOp::create(
          b, indexConst(b, rows.offset),
          arith::MulIOp::create(b, warp, indexConst(b, rows.bytesPerWarp))),
      {kMmaRows, rows.width + 8}, elem);
}

Value QueryTile::entryFirstRow(ImplicitLocOpBuilder &b, Value entry) const {
  Value stored = toIndex(b, memref::LoadOp::create(b, unionList, entry));
  if (packed)
    return stored;
  return arith::MulIOp::create(b, stored, indexConst(b, p.blockSize));
}

Value QueryTile::headOf(ImplicitLocOpBuilder &b, Value row) const {
  return arith::AddIOp::create(
      b, arith::MulIOp::create(b, kv, indexConst(b, G)),
      arith::MinUIOp::create(b, row, indexConst(b, G - 1)));
}

Value QueryTile::visibleKeys(ImplicitLocOpBuilder &b, Value firstKey) const {
  return arith::MinUIOp::create(
      b, arith::SubIOp::create(b, keys.row(b, keyEnd), firstKey),
      indexConst(b, p.blockSize));
}

void QueryTile::listBlocks(ImplicitLocOpBuilder &b) {
  // hasQuery is the warp's: its lanes walk the row together.
  Value n = buildIf(
      b, hasQuery, TypeRange{b.getIndexType()},
      [&](ImplicitLocOpBuilder &qb) -> SmallVector<Value> {
        return {walkAttendedBlocksByWarp(
            qb, e.arg("selection"), {batch, kv, query}, numKeys, keyEnd,
            p.blockSize, p.topK, lane,
            [&](ImplicitLocOpBuilder &sb, Value s32, Value at) {
              Value entry = s32;
              if (packed)
                entry =
                    toI32(sb, keys.row(sb, arith::MulIOp::create(
                                               sb, toIndex(sb, s32),
                                               indexConst(sb, p.blockSize))));
              memref::StoreOp::create(sb, entry, lists, ValueRange{warp, at});
            })};
      },
      [&](ImplicitLocOpBuilder &nb) -> SmallVector<Value> {
        return {indexConst(nb, 0)};
      })[0];
  buildIfThen(b, cmp(b, P::eq, lane, indexConst(b, 0)),
              [&](ImplicitLocOpBuilder &lb) {
                memref::StoreOp::create(lb, toI32(lb, n), counts, warp);
              });
}

void QueryTile::mergeLists(ImplicitLocOpBuilder &b) {
  const int64_t W = p.warps;
  buildIfThen(
      b, cmp(b, P::eq, tid, indexConst(b, 0)), [&](ImplicitLocOpBuilder &tb) {
        SmallVector<Value> ends, init;
        for (int64_t w = 0; w < W; ++w) {
          ends.push_back(toIndex(
              tb, memref::LoadOp::create(tb, counts, indexConst(tb, w))));
          init.push_back(indexConst(tb, 0));
        }
        init.push_back(indexConst(tb, 0));
        const int32_t none = std::numeric_limits<int32_t>::max();
        SmallVector<Value> out = buildLoop(
            tb, indexConst(tb, 0), indexConst(tb, W * p.topK), init,
            [&](ImplicitLocOpBuilder &lb, Value, ValueRange st) {
              SmallVector<Value> heads;
              Value least = arith::ConstantIntOp::create(lb, none, 32);
              for (int64_t w = 0; w < W; ++w) {
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
                  lb, P::ne, least, arith::ConstantIntOp::create(lb, none, 32));
              Value mask = arith::ConstantIntOp::create(lb, 0, 32);
              SmallVector<Value> next;
              for (int64_t w = 0; w < W; ++w) {
                Value takes = arith::AndIOp::create(
                    lb, any, arith::CmpIOp::create(lb, P::eq, heads[w], least));
                mask = arith::OrIOp::create(
                    lb, mask,
                    arith::SelectOp::create(
                        lb, takes, arith::ConstantIntOp::create(lb, 1 << w, 32),
                        arith::ConstantIntOp::create(lb, 0, 32)));
                next.push_back(arith::SelectOp::create(
                    lb, takes,
                    arith::AddIOp::create(lb, st[w], indexConst(lb, 1)),
                    st[w]));
              }
              Value n = st[W];
              buildIfThen(lb, any, [&](ImplicitLocOpBuilder &sb) {
                memref::StoreOp::create(sb, least, unionList, n);
                memref::StoreOp::create(sb, mask, unionMask, n);
              });
              next.push_back(arith::SelectOp::create(
                  lb, any, arith::AddIOp::create(lb, n, indexConst(lb, 1)), n));
              return next;
            });
        memref::StoreOp::create(tb, toI32(tb, out[W]), unionCount,
                                indexConst(tb, 0));
      });
}

void QueryTile::stageRows(ImplicitLocOpBuilder &b, Value source, int64_t width,
                          Value tile) const {
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

void QueryTile::copyEntry(ImplicitLocOpBuilder &b, Value entry) const {
  Value parity = arith::RemUIOp::create(b, entry, indexConst(b, 2));
  Value firstKey = entryFirstRow(b, entry);
  // Rows past the entry's sequence (the next one's, or zeros past the
  // buffer) are masked by each warp's visible count.
  Value lastKey = arith::SubIOp::create(b, keyRows, indexConst(b, 1));
  Value even = cmp(b, P::eq, parity, indexConst(b, 0));
  // The buffer as one view at a selected offset: a memref chosen by scf.if
  // would be a workgroup memref block argument, which the NVVM lowering
  // reports (spuriously) as a failed memory-space conversion.
  auto copy = [&](Value source, int64_t width, const int64_t (&offsets)[2]) {
    Value dst =
        tiles.viewAt(b,
                     arith::SelectOp::create(b, even, indexConst(b, offsets[0]),
                                             indexConst(b, offsets[1])),
                     {p.blockSize, width + 8}, elem);
    ChunkedTile tile{p.blockSize, width, 32};
    asyncCopyChunks(
        b, tile, lane,
        [&](ImplicitLocOpBuilder &cb, Value i) -> AsyncChunk {
          Value row = tile.row(cb, i), col = tile.column(cb, i);
          Value key = arith::AddIOp::create(cb, firstKey, row);
          Value real = cmp(cb, P::ult, key, keyRows);
          Value srcElements = arith::SelectOp::create(
              cb, real, indexConst(cb, kChunkElems), indexConst(cb, 0));
          return {dst,
                  {row, col},
                  source,
                  {batch, kv, arith::MinUIOp::create(cb, key, lastKey), col},
                  srcElements};
        },
        /*bypassL1=*/false);
  };
  copy(e.arg("keys"), p.headDim, p.key);
  copy(e.arg("values"), p.valueDim, p.value);
}

SmallVector<Value> QueryTile::stepOnEntry(ImplicitLocOpBuilder &b, Value u,
                                          Value parity, ValueRange acc,
                                          EntryStep step) {
  Value firstKey = entryFirstRow(b, u);
  return buildIf(
      b, cmp(b, P::eq, parity, indexConst(b, 0)), ValueRange(acc).getTypes(),
      [&](ImplicitLocOpBuilder &eb) {
        return step(eb, firstKey, keyTile[0], valueTile[0], acc);
      },
      [&](ImplicitLocOpBuilder &ob) {
        return step(ob, firstKey, keyTile[1], valueTile[1], acc);
      });
}

void QueryTile::runTile(ImplicitLocOpBuilder &b,
                        llvm::function_ref<void(ImplicitLocOpBuilder &)> stage,
                        llvm::function_ref<void(ImplicitLocOpBuilder &)> walk) {
  Value copier = cmp(b, P::eq, warp, indexConst(b, p.warps));
  initBufferBarriers(b);
  buildIfThen(b, cmp(b, P::ne, warp, indexConst(b, p.warps)),
              [&](ImplicitLocOpBuilder &qb) {
                listBlocks(qb);
                stage(qb);
              });
  gpu::BarrierOp::create(b); // the lists and row tiles are written
  mergeLists(b);
  gpu::BarrierOp::create(b); // and the union, and the barriers set up
  buildIf(
      b, copier, TypeRange{},
      [&](ImplicitLocOpBuilder &pb) {
        produceUnion(pb);
        return SmallVector<Value>{};
      },
      [&](ImplicitLocOpBuilder &wb) {
        walk(wb);
        return SmallVector<Value>{};
      });
}

void QueryTile::initBufferBarriers(ImplicitLocOpBuilder &b) {
  MLIRContext *ctx = b.getContext();
  auto type = nvgpu::MBarrierGroupType::get(
      ctx,
      gpu::AddressSpaceAttr::get(ctx,
                                 gpu::GPUDialect::getWorkgroupAddressSpace()),
      /*num_barriers=*/4);
  bufferBarriers = nvgpu::MBarrierCreateOp::create(b, type);
  buildIfThen(
      b, cmp(b, P::eq, tid, indexConst(b, 0)), [&](ImplicitLocOpBuilder &tb) {
        for (int64_t s = 0; s < 2; ++s) {
          nvgpu::MBarrierInitOp::create(tb, bufferBarriers, indexConst(tb, 32),
                                        indexConst(tb, s), Value());
          nvgpu::MBarrierInitOp::create(tb, bufferBarriers,
                                        indexConst(tb, 32 * p.warps),
                                        indexConst(tb, 2 + s), Value());
        }
      });
}

void QueryTile::waitPhase(ImplicitLocOpBuilder &b, Value id,
                          Value phase) const {
  Value parity = arith::TruncIOp::create(
      b, b.getI1Type(), arith::IndexCastUIOp::create(b, b.getI64Type(), phase));
  // The suspend-time hint of each try (ns); the op loops until the phase
  // completes.
  nvgpu::MBarrierTryWaitParityOp::create(b, bufferBarriers, parity,
                                         indexConst(b, 1000000), id);
}

void QueryTile::arrive(ImplicitLocOpBuilder &b, Value id) const {
  nvgpu::MBarrierArriveOp::create(
      b, nvgpu::MBarrierTokenType::get(b.getContext()), bufferBarriers, id);
}

void QueryTile::produceUnion(ImplicitLocOpBuilder &b) {
  Value count =
      toIndex(b, memref::LoadOp::create(b, unionCount, indexConst(b, 0)));
  Value one = indexConst(b, 1), two = indexConst(b, 2);
  buildLoop(b, indexConst(b, 0), count, ValueRange{},
            [&](ImplicitLocOpBuilder &lb, Value u, ValueRange) {
              Value slot = arith::RemUIOp::create(lb, u, two);
              Value round = arith::DivUIOp::create(lb, u, two);
              // Buffer `slot` is free once entry u - 2 is released.
              buildIfThen(lb, cmp(lb, P::uge, u, two),
                          [&](ImplicitLocOpBuilder &wb) {
                            waitPhase(wb, arith::AddIOp::create(wb, slot, two),
                                      arith::SubIOp::create(wb, round, one));
                          });
              copyEntry(lb, u);
              // Each lane's copies have landed before its arrival (a release):
              // the query warps that wait for the phase see the whole entry.
              NVVM::CpAsyncWaitGroupOp::create(lb, 0);
              arrive(lb, slot);
              return SmallVector<Value>{};
            });
}

SmallVector<Value> QueryTile::consumeUnion(ImplicitLocOpBuilder &b,
                                           ValueRange init, EntryStep step) {
  Value count =
      toIndex(b, memref::LoadOp::create(b, unionCount, indexConst(b, 0)));
  Value two = indexConst(b, 2);
  return buildLoop(b, indexConst(b, 0), count, init,
                   [&](ImplicitLocOpBuilder &lb, Value u, ValueRange acc) {
                     Value slot = arith::RemUIOp::create(lb, u, two);
                     Value round = arith::DivUIOp::create(lb, u, two);
                     Value mask = memref::LoadOp::create(lb, unionMask, u);
                     Value mine = arith::CmpIOp::create(
                         lb, P::ne,
                         arith::AndIOp::create(
                             lb, mask,
                             arith::ShLIOp::create(
                                 lb, arith::ConstantIntOp::create(lb, 1, 32),
                                 toI32(lb, warp))),
                         arith::ConstantIntOp::create(lb, 0, 32));
                     // Every warp waits for every entry, attended or not: a
                     // warp that skipped phase `round` of `full` could take the
                     // phase before it for this one (a parity wait tells only
                     // two phases apart), and release the buffer into the wrong
                     // phase of `empty`. Entries land in order, so the wait
                     // costs a warp nothing it would not wait for at its next
                     // attended entry.
                     waitPhase(lb, slot, round);
                     SmallVector<Value> out = buildIf(
                         lb, mine, ValueRange(acc).getTypes(),
                         [&](ImplicitLocOpBuilder &tb) {
                           return stepOnEntry(tb, u, slot, acc, step);
                         },
                         [&](ImplicitLocOpBuilder &) {
                           return SmallVector<Value>(acc.begin(), acc.end());
                         });
                     arrive(lb, arith::AddIOp::create(lb, slot, two));
                     return out;
                   });
}
