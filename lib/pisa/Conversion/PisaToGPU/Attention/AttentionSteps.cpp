//===- AttentionSteps.cpp - Tile steps of the attention kernels -----------===//

#include "Attention/AttentionSteps.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/TileCopy.h"
#include "Kernels/WarpgroupMma.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::pisa::detail;

SharedTiles::SharedTiles(ImplicitLocOpBuilder &b) {
  MLIRContext *ctx = b.getContext();
  bytes = gpu::DynamicSharedMemoryOp::create(
      b, MemRefType::get(
             {ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(),
             gpu::AddressSpaceAttr::get(
                 ctx, gpu::GPUDialect::getWorkgroupAddressSpace())));
}

int64_t SharedTiles::place(int64_t &at, int64_t bytes) {
  int64_t offset = at;
  at += llvm::alignTo(bytes, 16);
  return offset;
}

Value SharedTiles::view(ImplicitLocOpBuilder &b, int64_t offset,
                        ArrayRef<int64_t> shape, Type type) const {
  return viewAt(b, indexConst(b, offset), shape, type);
}

Value SharedTiles::viewAt(ImplicitLocOpBuilder &b, Value offset,
                          ArrayRef<int64_t> shape, Type type) const {
  if (shift)
    offset = arith::AddIOp::create(b, offset, shift);
  return memref::ViewOp::create(b, workgroupType(b.getContext(), shape, type),
                                bytes, offset, ValueRange{});
}

void SharedTiles::alignBase(ImplicitLocOpBuilder &b, int64_t alignment) {
  shift = Value();
  Value base = address(b, indexConst(b, 0));
  Value mask = arith::ConstantIntOp::create(b, alignment - 1, 64);
  // (alignment - base % alignment) % alignment
  shift = arith::IndexCastUIOp::create(
      b, b.getIndexType(),
      arith::AndIOp::create(
          b,
          arith::SubIOp::create(b, arith::ConstantIntOp::create(b, 0, 64),
                                base),
          mask));
}

Value SharedTiles::address(ImplicitLocOpBuilder &b, Value offset) const {
  Value base = arith::IndexCastUIOp::create(
      b, b.getI64Type(),
      memref::ExtractAlignedPointerAsIndexOp::create(b, bytes));
  Value at =
      shift ? arith::AddIOp::create(b, offset, shift).getResult() : offset;
  return arith::AddIOp::create(
      b, base, arith::IndexCastUIOp::create(b, b.getI64Type(), at));
}

static Value zeroChunk(ImplicitLocOpBuilder &b, Type elem) {
  auto type = VectorType::get({kChunkElems}, elem);
  return arith::ConstantOp::create(
      b, type, DenseElementsAttr::get(type, b.getZeroAttr(elem)));
}

/// The indices of the chunk at (row, col) of `tile` (col in elements, a
/// multiple of kChunkElems): a row-major [rows x width] tile, or one in the
/// 128-byte swizzle, [width / 64, rows, 8, 8] (WarpgroupMma.h).
static SmallVector<Value> chunkIndices(ImplicitLocOpBuilder &b, Value tile,
                                       Value row, Value col) {
  if (cast<MemRefType>(tile.getType()).getRank() == 2)
    return {row, col};
  return swizzledChunkIndices(
      b, row, arith::DivUIOp::create(b, col, indexConst(b, kChunkElems)));
}

static void storeChunk(ImplicitLocOpBuilder &b, const ChunkedTile &tile,
                       Value dst, Value i, Value v) {
  vector::StoreOp::create(
      b, v, dst, chunkIndices(b, dst, tile.row(b, i), tile.column(b, i)), false,
      llvm::MaybeAlign(16));
}

namespace {
/// Tile row r of a HeadRows tile: its slot, head index within the slot
/// (h) and head of the source (clamped to the group's last).
struct HeadRowPlace {
  Value slot, h, head;
};

HeadRowPlace headRowPlace(ImplicitLocOpBuilder &b, const HeadRows &from,
                          int64_t rows, Value r) {
  const int64_t perToken = from.rowsPerToken;
  // One token: its heads are the tile's rows.
  Value slot = indexConst(b, 0), h = r;
  if (perToken != rows) {
    slot = arith::DivUIOp::create(b, r, indexConst(b, perToken));
    h = arith::RemUIOp::create(b, r, indexConst(b, perToken));
  }
  Value head = arith::AddIOp::create(
      b, from.firstHead,
      arith::MinUIOp::create(b, h, indexConst(b, from.groupSize - 1)));
  return {slot, h, head};
}

/// Whether the row holds a head row of a query (else it is zeros).
Value holdsHeadRow(ImplicitLocOpBuilder &b, const HeadRows &from,
                   const HeadRowPlace &at) {
  Value keep =
      cmp(b, arith::CmpIPredicate::ult, at.h, indexConst(b, from.groupSize));
  if (from.holds)
    keep = arith::AndIOp::create(b, keep, from.holds(b, at.slot));
  return keep;
}
} // namespace

void mlir::pisa::detail::stageHeadRows(ImplicitLocOpBuilder &b,
                                       const HeadRows &from, int64_t rows,
                                       int64_t width, Value tile, Value tid,
                                       int64_t threads) {
  Type elem = cast<MemRefType>(from.source.getType()).getElementType();
  ChunkedTile chunks{rows, width, threads};
  copyChunks(
      b, chunks, tid,
      [&](ImplicitLocOpBuilder &lb, Value i) -> Value {
        HeadRowPlace at = headRowPlace(lb, from, rows, chunks.row(lb, i));
        Value v = vector::LoadOp::create(
            lb, VectorType::get({kChunkElems}, elem), from.source,
            ValueRange{from.batch, at.head, from.token(lb, at.slot),
                       chunks.column(lb, i)},
            false, llvm::MaybeAlign(16));
        return arith::SelectOp::create(lb, holdsHeadRow(lb, from, at), v,
                                       zeroChunk(lb, elem));
      },
      [&](ImplicitLocOpBuilder &lb, Value i, Value v) {
        storeChunk(lb, chunks, tile, i, v);
      });
}

void mlir::pisa::detail::copyHeadRowsAsync(ImplicitLocOpBuilder &b,
                                           const HeadRows &from, int64_t rows,
                                           int64_t width, Value tile, Value tid,
                                           int64_t threads) {
  ChunkedTile chunks{rows, width, threads};
  asyncCopyChunks(
      b, chunks, tid,
      [&](ImplicitLocOpBuilder &lb, Value i) -> AsyncChunk {
        Value r = chunks.row(lb, i), col = chunks.column(lb, i);
        HeadRowPlace at = headRowPlace(lb, from, rows, r);
        return {tile,
                chunkIndices(lb, tile, r, col),
                from.source,
                {from.batch, at.head, from.token(lb, at.slot), col},
                arith::SelectOp::create(lb, holdsHeadRow(lb, from, at),
                                        indexConst(lb, kChunkElems),
                                        indexConst(lb, 0))};
      },
      /*bypassL1=*/false);
}

Value mlir::pisa::detail::stridedBufferIndex(ImplicitLocOpBuilder &b,
                                             Value offset, ValueRange strides,
                                             ValueRange at) {
  Value linear = offset;
  for (auto [i, stride] : llvm::zip(at, strides))
    linear =
        arith::AddIOp::create(b, linear, arith::MulIOp::create(b, i, stride));
  return linear;
}

L2Prefetch::L2Prefetch(ImplicitLocOpBuilder &b, Value source) {
  elemBytes = cast<MemRefType>(source.getType()).getElementTypeBitWidth() / 8;
  auto meta = memref::ExtractStridedMetadataOp::create(b, source);
  offset = meta.getOffset();
  strides.assign(meta.getStrides().begin(), meta.getStrides().end());
  base = arith::IndexCastUIOp::create(
      b, b.getI64Type(),
      memref::ExtractAlignedPointerAsIndexOp::create(b, meta.getBaseBuffer()));
}

void L2Prefetch::fetch(ImplicitLocOpBuilder &b, ValueRange at,
                       int64_t bytes) const {
  Value linear = stridedBufferIndex(b, offset, strides, at);
  Value address = arith::AddIOp::create(
      b, base,
      arith::IndexCastUIOp::create(
          b, b.getI64Type(),
          arith::MulIOp::create(b, linear, indexConst(b, elemBytes))));
  NVVM::CpAsyncBulkPrefetchOp::create(
      b,
      LLVM::IntToPtrOp::create(b, LLVM::LLVMPointerType::get(b.getContext(), 1),
                               address),
      arith::ConstantIntOp::create(b, bytes, 32), Value());
}

void mlir::pisa::detail::prefetchHeadRowsL2(ImplicitLocOpBuilder &b,
                                            const HeadRows &from, int64_t rows,
                                            int64_t width, Value tid,
                                            int64_t threads) {
  L2Prefetch prefetch(b, from.source);
  const int64_t rowBytes =
      width *
      (cast<MemRefType>(from.source.getType()).getElementTypeBitWidth() / 8);
  buildLoop(
      b, tid, indexConst(b, rows), indexConst(b, threads), ValueRange{},
      [&](ImplicitLocOpBuilder &lb, Value r, ValueRange) -> SmallVector<Value> {
        HeadRowPlace at = headRowPlace(lb, from, rows, r);
        buildIfThen(
            lb, holdsHeadRow(lb, from, at), [&](ImplicitLocOpBuilder &tb) {
              prefetch.fetch(tb, {from.batch, at.head, from.token(tb, at.slot)},
                             rowBytes);
            });
        return {};
      });
}

void mlir::pisa::detail::stageKeyRows(ImplicitLocOpBuilder &b, Value source,
                                      Value batch, Value kv, Value firstKey,
                                      int64_t rows, int64_t width, Value tile,
                                      Value tid, int64_t threads) {
  Type elem = cast<MemRefType>(source.getType()).getElementType();
  Value numKeys = dimOf(b, source, 2);
  Value lastKey = arith::SubIOp::create(b, numKeys, indexConst(b, 1));
  ChunkedTile chunks{rows, width, threads};
  copyChunks(
      b, chunks, tid,
      [&](ImplicitLocOpBuilder &lb, Value i) -> Value {
        Value key = arith::AddIOp::create(lb, firstKey, chunks.row(lb, i));
        Value v = vector::LoadOp::create(
            lb, VectorType::get({kChunkElems}, elem), source,
            ValueRange{batch, kv, arith::MinUIOp::create(lb, key, lastKey),
                       chunks.column(lb, i)},
            false, llvm::MaybeAlign(16));
        return arith::SelectOp::create(
            lb, cmp(lb, arith::CmpIPredicate::ult, key, numKeys), v,
            zeroChunk(lb, elem));
      },
      [&](ImplicitLocOpBuilder &lb, Value i, Value v) {
        storeChunk(lb, chunks, tile, i, v);
      });
}

static Value readTile(ImplicitLocOpBuilder &b, Value tile, int64_t rows,
                      int64_t cols, Value row0, Value col0) {
  Type elem = cast<MemRefType>(tile.getType()).getElementType();
  return vector::TransferReadOp::create(
      b, VectorType::get({rows, cols}, elem), tile, ValueRange{row0, col0},
      arith::ConstantOp::create(b, b.getZeroAttr(elem)),
      SmallVector<bool>(2, true));
}

void mlir::pisa::detail::warpSplitRowsProduct(ImplicitLocOpBuilder &b,
                                              Value lhsTile, int64_t m,
                                              int64_t k, Value rhsTile,
                                              int64_t n, Value outTile,
                                              Value warp, int64_t warps) {
  const int64_t perWarp = n / warps;
  Value zero = indexConst(b, 0);
  Value first = arith::MulIOp::create(b, warp, indexConst(b, perWarp));
  Value lhs = readTile(b, lhsTile, m, k, zero, zero);
  Value rhs = readTile(b, rhsTile, perWarp, k, first, zero);
  auto accType = VectorType::get({m, perWarp}, b.getF32Type());
  Value product = tileProduct(b, lhs, rhs, f32Splat(b, accType, 0.0f),
                              /*rhsIsKN=*/false);
  vector::TransferWriteOp::create(b, product, outTile, ValueRange{zero, first},
                                  SmallVector<bool>(2, true));
}

void mlir::pisa::detail::warpSplitColumnsAccumulate(
    ImplicitLocOpBuilder &b, Value lhsTile, int64_t m, int64_t k, Value rhsTile,
    int64_t n, Value accTile, Value warp, int64_t warps, int64_t maxAccElems) {
  const int64_t perWarp = n / warps;
  // The widest strip (a multiple of 8 dividing perWarp) whose accumulator
  // fits.
  int64_t strip = 8;
  for (int64_t s = perWarp; s >= 8; s -= 8)
    if (perWarp % s == 0 && m * s <= maxAccElems) {
      strip = s;
      break;
    }
  Value zero = indexConst(b, 0);
  Value lhs = readTile(b, lhsTile, m, k, zero, zero);
  for (int64_t s = 0; s < perWarp / strip; ++s) {
    Value col0 = arith::AddIOp::create(
        b, arith::MulIOp::create(b, warp, indexConst(b, strip)),
        indexConst(b, s * warps * strip));
    Value rhs = readTile(b, rhsTile, k, strip, zero, col0);
    Value acc = readTile(b, accTile, m, strip, zero, col0);
    Value product = tileProduct(b, lhs, rhs, acc, /*rhsIsKN=*/true);
    vector::TransferWriteOp::create(b, product, accTile, ValueRange{zero, col0},
                                    SmallVector<bool>(2, true));
  }
}
