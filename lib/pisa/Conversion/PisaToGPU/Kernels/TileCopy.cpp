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
    bool bypassL1) {
  SmallVector<Value> tokens;
  for (int64_t n = 0; n < tile.passes(); ++n) {
    Value i = tile.chunk(b, tid, n);
    if (tile.ragged(n))
      i = tile.clampToLast(b, i);
    AsyncChunk c = chunkAt(b, i);
    tokens.push_back(nvgpu::DeviceAsyncCopyOp::create(
        b, c.dst, c.dstAt, c.src, c.srcAt, b.getIndexAttr(kChunkElems),
        c.srcElements, bypassL1 ? b.getUnitAttr() : UnitAttr()));
  }
  return nvgpu::DeviceAsyncCreateGroupOp::create(
      b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), tokens);
}
