//===- TileCopy.cpp - Staging tiles in shared memory ----------------------===//

#include "Kernels/TileCopy.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

using namespace mlir;
using namespace mlir::pisa::detail;

Value ChunkedTile::chunk(ImplicitLocOpBuilder &b, Value tid, int64_t n) const {
  return arith::AddIOp::create(b, tid, indexConst(b, n * threads));
}

Value ChunkedTile::clampToLast(ImplicitLocOpBuilder &b, Value i) const {
  return arith::MinUIOp::create(b, i, indexConst(b, count() - 1));
}

Value ChunkedTile::row(ImplicitLocOpBuilder &b, Value i) const {
  return arith::DivUIOp::create(b, i, indexConst(b, perRow()));
}

Value ChunkedTile::chunkInRow(ImplicitLocOpBuilder &b, Value i) const {
  return arith::RemUIOp::create(b, i, indexConst(b, perRow()));
}

Value ChunkedTile::column(ImplicitLocOpBuilder &b, Value i) const {
  return arith::MulIOp::create(b, chunkInRow(b, i), indexConst(b, kChunkElems));
}

SmallVector<Value> mlir::pisa::detail::loadChunks(
    ImplicitLocOpBuilder &b, const ChunkedTile &tile, Value tid,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> load) {
  SmallVector<Value> chunks;
  for (int64_t n = 0; n < tile.passes(); ++n)
    chunks.push_back(load(b, tile.clampToLast(b, tile.chunk(b, tid, n))));
  return chunks;
}

void mlir::pisa::detail::storeChunks(
    ImplicitLocOpBuilder &b, const ChunkedTile &tile, Value tid,
    ArrayRef<Value> chunks,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> store) {
  for (int64_t n = 0, e = chunks.size(); n < e; ++n) {
    Value i = tile.chunk(b, tid, n), v = chunks[n];
    if (!tile.ragged(n)) {
      store(b, i, v);
      continue;
    }
    buildIfThen(b,
                arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i,
                                      indexConst(b, tile.count())),
                [&](ImplicitLocOpBuilder &sb) { store(sb, i, v); });
  }
}

void mlir::pisa::detail::copyChunks(
    ImplicitLocOpBuilder &b, const ChunkedTile &tile, Value tid,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> load,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> store) {
  storeChunks(b, tile, tid, loadChunks(b, tile, tid, load), store);
}

Value mlir::pisa::detail::asyncCopyChunks(
    ImplicitLocOpBuilder &b, const ChunkedTile &tile, Value tid,
    llvm::function_ref<AsyncChunk(ImplicitLocOpBuilder &, Value)> chunkAt,
    bool bypassL1, bool chunksFirst) {
  auto issue = [&](ImplicitLocOpBuilder &cb, const AsyncChunk &c) {
    return nvgpu::DeviceAsyncCopyOp::create(
        cb, c.dst, c.dstAt, c.src, c.srcAt, cb.getIndexAttr(kChunkElems),
        c.srcElements, bypassL1 ? cb.getUnitAttr() : UnitAttr());
  };
  auto copy = [&](ImplicitLocOpBuilder &cb, Value i) {
    return issue(cb, chunkAt(cb, i));
  };
  // A ragged round's chunk is named inside its branch: chunkAt may read
  // out of bounds for a thread past the tile.
  SmallVector<AsyncChunk> named;
  if (chunksFirst)
    for (int64_t n = 0; n < tile.passes() && !tile.ragged(n); ++n)
      named.push_back(chunkAt(b, tile.chunk(b, tid, n)));
  SmallVector<Value> tokens;
  for (int64_t n = 0; n < tile.passes(); ++n) {
    if (n < static_cast<int64_t>(named.size())) {
      tokens.push_back(issue(b, named[n]));
      continue;
    }
    Value i = tile.chunk(b, tid, n);
    if (!tile.ragged(n)) {
      tokens.push_back(copy(b, i));
      continue;
    }
    // Threads past the last chunk copy nothing: two threads writing one
    // chunk (even the same bytes) is a shared-memory race. The copy's
    // token stays inside the branch; the group below commits every copy
    // this thread issued before it (cp.async.commit_group), this one too.
    buildIfThen(b,
                arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i,
                                      indexConst(b, tile.count())),
                [&](ImplicitLocOpBuilder &cb) { copy(cb, i); });
  }
  return nvgpu::DeviceAsyncCreateGroupOp::create(
      b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), tokens);
}
