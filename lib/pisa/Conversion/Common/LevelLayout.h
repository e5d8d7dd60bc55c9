//===- LevelLayout.h - The pyramid layout as scalars, static or not -*- C++
//-*-===//
//
// PyramidLayout (docs/semantics.md, section 1) for code that walks the
// levels one at a time (the GPU kernels and their launches): constants when
// N is static, so the walk unrolls as before; index values computed from N
// at run time otherwise, so one compiled kernel serves every length.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_COMMON_LEVELLAYOUT_H
#define PISA_LIB_CONVERSION_COMMON_LEVELLAYOUT_H

#include "NodeScore.h"

#include "pisa/Analysis/PyramidLayout.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>

namespace mlir::pisa::detail {

class LevelLayout {
public:
  /// The layout of `numKeys` keys (index); N = 0 has no leaves and no rows.
  /// The pyramid's rows start at `firstRow` of its buffer when given (a
  /// sequence of a packed varlen pyramid), else at row 0. With `capacity`
  /// (a cache, docs/semantics.md section 4) the levels have N's node
  /// counts but sit at the rows of a pyramid of `capacity` keys; the walk
  /// is then never unrolled (fixed() is empty).
  LevelLayout(ImplicitLocOpBuilder &b, Value numKeys, int64_t blockSize,
              int64_t branching, Value firstRow = Value(),
              Value capacity = Value());

  int64_t blockSize() const { return block; }
  int64_t branching() const { return fan; }
  /// The static layout, when N is a constant >= 1.
  const std::optional<PyramidLayout> &fixed() const { return layout; }
  Value numKeys() const { return keys; }
  Value numLeaves() const { return leaves; }
  /// Rows of the packed pyramid (P; of N, also with a capacity).
  Value totalRows() const { return rows; }
  Value numLevels() const { return levels; }

  /// One step of a walk from level `level` (>= 2) to its children: `span`
  /// is the leaves per node of the level, `children` its child level (its
  /// rowBase a row of the buffer, firstRow included).
  struct Step {
    Value span;
    ChildLevel children;
  };
  using StepBody = llvm::function_ref<SmallVector<Value>(
      ImplicitLocOpBuilder &, const Step &, ValueRange state)>;
  /// Runs `body` for levels L down to 2, threading `state` through:
  /// unrolled with constants for a static layout, else one scf.for.
  SmallVector<Value> walkDown(ImplicitLocOpBuilder &b, ValueRange state,
                              StepBody body) const;

  /// b_t = min(t / C, M_1 - 1).
  Value leafOf(ImplicitLocOpBuilder &b, Value position) const;

private:
  int64_t block, fan;
  std::optional<PyramidLayout> layout;
  Value keys, leaves, rows, levels, rootSpan, firstRow;
  /// With a capacity: its leaves, and the first row of N's root level.
  Value capacityLeaves, rootRow;
};

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_COMMON_LEVELLAYOUT_H
