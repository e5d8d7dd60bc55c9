//===- WarpMma.h - One warp's mma.sync fragments from shared tiles -*- C++
//-*-===//
//
// A warp's m16n8k16 products over 16-bit tiles in shared memory (rows
// padded so that ldmatrix's row reads fall in different banks) with f32
// accumulators held in registers, for kernels that carry the accumulators
// across a loop (--pisa-vector-to-mma-sync reads and writes them through
// memory): A fragments by ldmatrix x4, B fragments of an [n x k] tile by
// ldmatrix x2 and of a [k x n] tile by ldmatrix.trans x2, and the
// accumulators of one k16 step turned into an A fragment in place (an
// m16n8 C pair is an m16n8k16 A), as FlashAttention-2 does with P.
//
// Lane (g, i) = (lane / 4, lane % 4) holds accumulator rows g and g + 8,
// columns 2 i and 2 i + 1 of each n8 tile (vector<2x2xf32>: [row half][j]).
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_KERNELS_WARPMMA_H
#define PISA_LIB_CONVERSION_PISATOGPU_KERNELS_WARPMMA_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::pisa::detail {

/// mma.sync m16n8k16: rows of A and C, columns of B and C, the k step.
constexpr int64_t kMmaRows = 16;
constexpr int64_t kMmaCols = 8;
constexpr int64_t kMmaK = 16;

struct WarpFragments {
  Value lane;
  /// The tiles' 16-bit element type.
  Type elem;

  /// The A fragment of rows [row0, row0 + 16) x columns [col0, col0 + 16)
  /// of a row-major [m x k] tile.
  Value loadA(ImplicitLocOpBuilder &b, Value tile, Value row0,
              Value col0) const;
  /// The B fragment (k16 x n8) of an [n x k] row-major tile: rows [n0, n0 +
  /// 8), columns [k0, k0 + 16).
  Value loadBFromNK(ImplicitLocOpBuilder &b, Value tile, Value n0,
                    Value k0) const;
  /// The B fragment of a [k x n] row-major tile: rows [k0, k0 + 16),
  /// columns [n0, n0 + 8).
  Value loadBFromKN(ImplicitLocOpBuilder &b, Value tile, Value k0,
                    Value n0) const;

  /// A B^T for rows [aRow0, +16) of the [m x k] tile `a` and rows [bRow0,
  /// + 8 nTiles) of the [n x k] tile `b_`, over k columns: nTiles f32
  /// accumulators from zero.
  SmallVector<Value> productNT(ImplicitLocOpBuilder &b, Value a, Value aRow0,
                               Value bTile, Value bRow0, int64_t k,
                               int64_t nTiles) const;

  /// acc + A B for the A fragment `a` and rows [k0, k0 + 16) x columns
  /// [n0, n0 + 8) of the [k x n] tile `bTile`.
  Value accumulateKN(ImplicitLocOpBuilder &b, Value a, Value bTile, Value k0,
                     int64_t n0, Value acc) const;

  /// The A fragment (element type) of two n8 tiles' f32 values as one k16
  /// step: values[t] holds tile t's four, [row half * 2 + j].
  Value accumulatorsAsA(ImplicitLocOpBuilder &b,
                        ArrayRef<SmallVector<Value>> values) const;
};

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_KERNELS_WARPMMA_H
