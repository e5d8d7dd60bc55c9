//===- LayoutTables.h - The pyramid layout as IR values ---------*- C++ -*-===//
//
// PyramidLayout (docs/semantics.md, section 1) for lowerings: per level its
// node count, first row and leaves per node, as tensor<65 x index> tables
// indexed by level (entry 0 unused). A constant N gives constant tables; a
// dynamic N computes them at run time with the same recurrence, so one
// compiled program serves every length.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_COMMON_LAYOUTTABLES_H
#define PISA_LIB_CONVERSION_COMMON_LAYOUTTABLES_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::pisa::detail {

/// Levels of any pyramid: g >= 2 and N < 2^63 give at most 64.
constexpr int64_t kMaxLevels = 64;

struct LayoutTables {
  Value sizes, offsets, spans; ///< tensor<kMaxLevels+1 x index>
  Value numLevels, numLeaves, totalRows;
};

/// The layout of `numKeys` keys (an index value; N = 0 gives no levels and
/// no rows) with leaf block size C and branching g.
LayoutTables buildLayoutTables(ImplicitLocOpBuilder &b, Value numKeys,
                               int64_t blockSize, int64_t branching);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_COMMON_LAYOUTTABLES_H
