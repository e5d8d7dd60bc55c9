//===- PyramidRows.h - Pyramid kernels' rows of d threads ------*- C++ -*-===//
//
// What the pyramid build's top-levels kernel and the append share: a block
// as rows of d threads (one node per row, one feature per thread) and the
// mean of a node's children written by such a row.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_PYRAMID_PYRAMIDROWS_H
#define PISA_LIB_CONVERSION_PISATOGPU_PYRAMID_PYRAMIDROWS_H

#include "../Common/NodeScore.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::pisa::detail {

/// Stores mean(src[b, h, base + c, e] for c < count) to dst[b, h, row, e]
/// (src's element e of row base + c at `srcAt(base + c, e)` when given).
void emitMean(ImplicitLocOpBuilder &b, Value src, Value dst, Value batch,
              Value head, Value base, Value count, Value row, Value feature,
              const RowIndices &srcAt = nullptr);

/// Threads of the top-levels kernel: `rows` x d, one row of d per node.
int64_t topLevelRows(int64_t d);

/// A block of the top-levels and append kernels: rows of d threads, one
/// node per row at a time, one feature per thread.
struct BlockRows {
  Value row, feature;
  int64_t count;
};

/// Where a block of those kernels works: batch x KV head blockIdx.y, its
/// `threads` as rows of d features.
struct RowBlock {
  Value batch, head;
  BlockRows rows;
};
RowBlock rowBlock(ImplicitLocOpBuilder &b, int64_t numHeads, int64_t d,
                  int64_t threads);

/// Nodes first + row, first + row + rows, ... below `end` of the level at
/// row `levelOffset`, each the mean of its (at most g) children in the
/// level of `childCount` nodes at row `childOffset`.
void emitLevelNodes(ImplicitLocOpBuilder &b, Value pyramid, Value batch,
                    Value head, Value childOffset, Value childCount,
                    Value levelOffset, Value first, Value end,
                    const BlockRows &rows, int64_t fan);

/// The pattern of pisa.kernel.pyramid_append (PyramidAppend.cpp).
void populatePyramidAppendPatterns(RewritePatternSet &patterns);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_PYRAMID_PYRAMIDROWS_H
