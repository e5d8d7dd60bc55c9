//===- TileCopy.h - Staging tiles in shared memory --------------*- C++ -*-===//
//
// How every kernel moves a tile of 16-bit elements between global and
// shared memory, written once: the tile is cut into 16-byte chunks, chunk i
// is row i / (width / 8), elements [8 (i % (width / 8)), + 8), and thread t
// of a block (or lane t of a warp) takes chunks t, t + threads, ..., so
// consecutive threads take consecutive chunks of a row and each warp access
// reads whole rows. Two ways to copy: through registers (every load issued
// before the first store, so that their latencies overlap) or by cp.async
// (no registers, completion tracked as one group). The callers say only
// where chunk i comes from and where it goes.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_KERNELS_TILECOPY_H
#define PISA_LIB_CONVERSION_PISATOGPU_KERNELS_TILECOPY_H

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::pisa::detail {

/// 16-bit elements in one 16-byte copy.
constexpr int64_t kChunkElems = 8;

/// A tile of `rows` rows of `width` 16-bit elements (a multiple of 8), moved
/// in 16-byte chunks by `threads` threads.
struct ChunkedTile {
  int64_t rows, width, threads;

  int64_t perRow() const { return width / kChunkElems; }
  int64_t count() const { return rows * perRow(); }
  /// Rounds of `threads` chunks that cover the tile.
  int64_t passes() const { return (count() + threads - 1) / threads; }
  /// Whether round n has threads past the last chunk.
  bool ragged(int64_t n) const { return (n + 1) * threads > count(); }

  /// Thread `tid`'s chunk in round n: tid + n threads.
  Value chunk(ImplicitLocOpBuilder &b, Value tid, int64_t n) const;
  /// min(i, last chunk): a thread past the tile repeats the last chunk.
  Value clampToLast(ImplicitLocOpBuilder &b, Value i) const;
  /// Chunk i's row, its chunk within the row (i % perRow) and its first
  /// element column (8 (i % perRow)).
  Value row(ImplicitLocOpBuilder &b, Value i) const;
  Value chunkInRow(ImplicitLocOpBuilder &b, Value i) const;
  Value column(ImplicitLocOpBuilder &b, Value i) const;
};

/// Loads every chunk this thread takes, chunk index clamped to the last
/// (`load(i)` stays in bounds), all before any is used. One value per round.
SmallVector<Value>
loadChunks(ImplicitLocOpBuilder &b, const ChunkedTile &tile, Value tid,
           llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> load);

/// Stores loadChunks' values, one per round; a chunk past the tile (the
/// ragged round) is not stored.
void storeChunks(
    ImplicitLocOpBuilder &b, const ChunkedTile &tile, Value tid,
    ArrayRef<Value> chunks,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> store);

/// loadChunks then storeChunks: a straight-line copy whose loads all issue
/// before the first store (a loop would wait for each in turn).
void copyChunks(
    ImplicitLocOpBuilder &b, const ChunkedTile &tile, Value tid,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> load,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> store);

/// One cp.async chunk: `srcElements` (8, or 0 to zero-fill the destination)
/// from src[srcAt] to dst[dstAt].
struct AsyncChunk {
  Value dst;
  SmallVector<Value> dstAt;
  Value src;
  SmallVector<Value> srcAt;
  Value srcElements;
};

/// Copies the tile by cp.async, `chunkAt(i)` naming chunk i's source and
/// destination (a thread past the tile copies nothing), through L1 or
/// bypassing it (.cg). With `chunksFirst`, chunkAt runs for every full
/// round before the first copy is issued: where it reads memory (a row
/// index), the reads issue together and rounds that read the same index
/// share one, instead of each read waiting behind the copy before it (a
/// copy may write any memory as far as the compiler knows). Returns the
/// copies' group token.
Value asyncCopyChunks(
    ImplicitLocOpBuilder &b, const ChunkedTile &tile, Value tid,
    llvm::function_ref<AsyncChunk(ImplicitLocOpBuilder &, Value)> chunkAt,
    bool bypassL1, bool chunksFirst = false);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_KERNELS_TILECOPY_H
