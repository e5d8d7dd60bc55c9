//===- AttentionSteps.h - Tile steps of the attention kernels ---*- C++ -*-===//
//
// The steps the backward's block kernels are built from, each over tiles in
// shared memory of one block of four warps: staging a query's G head rows
// or a key block's rows, the score-shaped product (warps split the rhs
// rows) and the accumulating product (warps split the output columns),
// both as vector.contract for --pisa-vector-to-mma-sync.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_ATTENTIONSTEPS_H
#define PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_ATTENTIONSTEPS_H

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::pisa::detail {

/// The block's tiles are carved at fixed byte offsets out of one dynamic
/// shared-memory allocation (TOOLCHAIN.md: dynamic and static shared memory
/// must not be mixed); offsets are 16-byte aligned.
class SharedTiles {
public:
  /// Creates the gpu.dynamic_shared_memory op at the builder's point.
  explicit SharedTiles(ImplicitLocOpBuilder &b);
  /// Reserves `bytes` and returns their offset (planning, no IR).
  static int64_t place(int64_t &at, int64_t bytes);
  /// The workgroup memref<shape x type> at byte `offset`.
  Value view(ImplicitLocOpBuilder &b, int64_t offset, ArrayRef<int64_t> shape,
             Type type) const;
  /// The same at a byte offset computed in the kernel (a warp's own tile,
  /// one of two buffers).
  Value viewAt(ImplicitLocOpBuilder &b, Value offset, ArrayRef<int64_t> shape,
               Type type) const;
  /// Moves offset 0 of every view to the allocation's first
  /// `alignment`-byte boundary (the tiles wgmma reads in the 128-byte
  /// swizzle start at 1024-byte boundaries); the allocation must hold
  /// alignment - 16 bytes more than the tiles.
  void alignBase(ImplicitLocOpBuilder &b, int64_t alignment);
  /// The shared-memory address (i64) of the tiles' byte `offset`.
  Value address(ImplicitLocOpBuilder &b, Value offset) const;

private:
  Value bytes;
  /// Bytes from the allocation's start to offset 0 (alignBase), or null.
  Value shift;
};

/// Where a tile of head rows comes from: tile rows [s R, (s + 1) R) (R =
/// rowsPerToken) are slot s's token, row s R + h its head firstHead + h
/// of `source` ([B, H, T, X]) for h < G; other rows, and the rows of a
/// slot `holds` says is empty, are zeros. `token(slot)` gives a slot's
/// token (in bounds even for an empty slot); `holds` may be null (every
/// slot holds one).
struct HeadRows {
  Value source, batch, firstHead;
  int64_t groupSize, rowsPerToken;
  llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> token;
  llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> holds = nullptr;
};

/// Copies `rows` head rows of `width` 16-bit elements into `tile`, 16-byte
/// chunks over `threads` threads. Here and in copyHeadRowsAsync and
/// stageKeyRows the tile is row-major ([rows x width]) or in the 128-byte
/// swizzle ([width / 64, rows, 8, 8], WarpgroupMma.h), by its rank.
void stageHeadRows(ImplicitLocOpBuilder &b, const HeadRows &from, int64_t rows,
                   int64_t width, Value tile, Value tid, int64_t threads);

/// stageHeadRows by cp.async (16-byte chunks through L1, zero-filled where
/// a row is zeros), committed as one group: the tile is written once the
/// group has landed (cp.async.wait_group) and a barrier has passed.
void copyHeadRowsAsync(ImplicitLocOpBuilder &b, const HeadRows &from,
                       int64_t rows, int64_t width, Value tile, Value tid,
                       int64_t threads);

/// The buffer index of element `at` of a memref whose strided metadata
/// (memref.extract_strided_metadata) has `offset` and `strides`.
Value stridedBufferIndex(ImplicitLocOpBuilder &b, Value offset,
                         ValueRange strides, ValueRange at);

/// Asks the L2 for `bytes` bytes of a global memref from an element
/// (cp.async.bulk.prefetch.L2; `bytes` and the element's address multiples
/// of 16): the memref's base address is read once, at construction.
class L2Prefetch {
public:
  L2Prefetch(ImplicitLocOpBuilder &b, Value source);
  /// Asks for `bytes` bytes from element `at` of the source.
  void fetch(ImplicitLocOpBuilder &b, ValueRange at, int64_t bytes) const;

private:
  Value offset, base;
  SmallVector<Value> strides;
  int64_t elemBytes;
};

/// Asks the L2 for the head rows a later copyHeadRowsAsync of `from` will
/// read (`width` 16-bit elements a row, a row a thread over `threads`
/// threads, cp.async.bulk.prefetch.L2): no shared memory, nothing to wait
/// for. Rows that copy would zero-fill are not asked for.
void prefetchHeadRowsL2(ImplicitLocOpBuilder &b, const HeadRows &from,
                        int64_t rows, int64_t width, Value tid,
                        int64_t threads);

/// Copies the rows [firstKey, firstKey + rows) of head `kv` of `source`
/// ([B, Hkv, N, X]) into `tile`; rows at or past N are zeros (a zero
/// probability times a garbage value could be NaN).
void stageKeyRows(ImplicitLocOpBuilder &b, Value source, Value batch, Value kv,
                  Value firstKey, int64_t rows, int64_t width, Value tile,
                  Value tid, int64_t threads);

/// out[:, w n/W .. (w+1) n/W) = lhs x rhs[w n/W .., :]^T for warp w of W:
/// lhs the [m x k] tile, rhs an [n x k] tile (keys or values), out f32.
void warpSplitRowsProduct(ImplicitLocOpBuilder &b, Value lhsTile, int64_t m,
                          int64_t k, Value rhsTile, int64_t n, Value outTile,
                          Value warp, int64_t warps);

/// acc += lhs x rhs: lhs the [m x k] tile, rhs a [k x n] tile, acc f32 [m x
/// n]. Warps take column strips in turn (strip s of warp w: columns
/// (s W + w) strip ..), each strip narrow enough that its accumulator stays
/// within `maxAccElems` f32 values.
void warpSplitColumnsAccumulate(ImplicitLocOpBuilder &b, Value lhsTile,
                                int64_t m, int64_t k, Value rhsTile, int64_t n,
                                Value accTile, Value warp, int64_t warps,
                                int64_t maxAccElems);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_ATTENTIONSTEPS_H
