//===- WarpgroupMma.h - sm_90a warpgroup products from shared tiles -*- C++
//-*-//
//
// A warpgroup's (four warps') wgmma products over 16-bit tiles in shared
// memory, written once for the kernels that use them (the selection's
// stage-2 scorer and the backward's key kernel):
//
//   - the tile layout: K-major in the 128-byte swizzle, [width / 64 blocks]
//     x [rows] x [8 chunks of 16 bytes], the chunk c of row r stored at
//     position c ^ (r % 8), every tile at a 1024-byte boundary. The same
//     bytes serve as a K-major operand (rows are M or N, the 64-column
//     blocks K) and as an MN-major one (rows are K, the blocks MN): a V
//     tile copied like a K tile is P V's B operand as it is.
//   - the matrix descriptors of both readings and the offset of a k16 step;
//   - the product: m64nNk16 steps over K, the accumulators (N / 2 f32 a
//     thread) returned in registers, where warp w holds rows 16 w + lane / 4
//     and that + 8, columns 8 j + 2 (lane % 4) + {0, 1} at accumulators
//     4 j + {0, 1} and 4 j + {2, 3}: each warp's part is an m16 mma.sync
//     accumulator tile (WarpMma.h), so the kernels' row arithmetic serves
//     both.
//
// nvgpu.warpgroup.mma leaves its accumulator opaque until stored to memory,
// so the products are stated with the NVVM ops (docs/gpu.md).
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_KERNELS_WARPGROUPMMA_H
#define PISA_LIB_CONVERSION_PISATOGPU_KERNELS_WARPGROUPMMA_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::pisa::detail {

constexpr int64_t kWarpgroupRows = 64; // wgmma's M
constexpr int64_t kWarpgroupThreads = 128;
/// The 128-byte swizzle: a row of 64 16-bit columns, 8 chunks of 16 bytes.
constexpr int64_t kSwizzleRowBytes = 128;
constexpr int64_t kSwizzleColumns = 64;
/// The alignment of a swizzled tile (8 rows of 128 bytes).
constexpr int64_t kSwizzleAtomBytes = 1024;
constexpr int64_t kWgmmaK = 16;     // wgmma's K for 16-bit inputs
constexpr int64_t kWgmmaMaxN = 256; // wgmma's largest N

/// Bytes of a swizzled tile of `rows` rows of `width` 16-bit columns.
inline int64_t swizzledTileBytes(int64_t rows, int64_t width) {
  return rows * width * 2;
}

/// The shape of such a tile as a memref of 16-bit elements: [width / 64
/// blocks, rows, 8 chunks, 8 elements].
inline SmallVector<int64_t> swizzledShape(int64_t rows, int64_t width) {
  return {width / kSwizzleColumns, rows, kSwizzleRowBytes / 16, 8};
}

/// The indices in such a tile ([width / 64, rows, 8, 8]) of the 16-byte
/// chunk `chunk` (of width / 8) of row `row`: block chunk / 8, the row,
/// position (chunk % 8) ^ (row % 8), element 0.
SmallVector<Value> swizzledChunkIndices(ImplicitLocOpBuilder &b, Value row,
                                        Value chunk);

/// The descriptor of a K-major tile at shared address `address` (i64, at a
/// 1024-byte boundary): leading offset unused, 1024 bytes (8 rows) between
/// row groups.
Value kMajorDescriptor(ImplicitLocOpBuilder &b, Value address);

/// The descriptor of the same tile read MN-major (its rows are K): 1024
/// bytes between groups of 8 K rows, `rows` x 128 bytes between its
/// 64-column blocks of MN.
Value mnMajorDescriptor(ImplicitLocOpBuilder &b, Value address, int64_t rows);

/// K-step s's start, in the descriptor's 16-byte units: in a K-major tile
/// of `rows` rows (block s / 4 of 64 columns, 32 bytes a step within it),
/// or in an MN-major one (16 rows of 128 bytes a step).
int64_t kMajorStepOffset(int64_t s, int64_t rows);
int64_t mnMajorStepOffset(int64_t s);

/// One operand of a product: its descriptor, whether it is read MN-major,
/// and the rows of its tile (for a K-major operand's step offsets).
struct WarpgroupOperand {
  Value descriptor;
  bool mnMajor;
  int64_t rows;
};

/// The 64 x n product of A (64 x k, K-major) and B (k x n) over k in steps
/// of 16: into `acc` (the struct of n / 2 f32, scale-d one) or from zero
/// (`acc` null). Fences before, commits, and waits for it.
Value warpgroupProduct(ImplicitLocOpBuilder &b, Type elem, int64_t n, int64_t k,
                       const WarpgroupOperand &a,
                       const WarpgroupOperand &bOperand, Value acc);

/// The same with A in registers: `aFragments` holds one mma.sync A
/// fragment a k16 step (vector<4x2 x elem>, WarpMma.h: warp w's rows 16 w
/// ..), which is wgmma's register layout of A. The NVVM op takes A from
/// shared memory only, so this one is inline PTX.
Value warpgroupProductRegisterA(ImplicitLocOpBuilder &b, Type elem, int64_t n,
                                ArrayRef<Value> aFragments,
                                const WarpgroupOperand &bOperand, Value acc);

/// Orders this thread's writes of shared memory (stores, landed cp.async
/// copies) before the tensor cores' reads of it (the async proxy); they
/// see them once a barrier after every writer's fence has passed.
void fenceSharedToTensorCores(ImplicitLocOpBuilder &b);

/// The accumulator struct's values as WarpMma.h's n8 tiles
/// (vector<2x2xf32>: [row half][j]), and back.
SmallVector<Value> accumulatorTiles(ImplicitLocOpBuilder &b, Value acc,
                                    int64_t n);
Value accumulatorStruct(ImplicitLocOpBuilder &b, ArrayRef<Value> tiles);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_KERNELS_WARPGROUPMMA_H
