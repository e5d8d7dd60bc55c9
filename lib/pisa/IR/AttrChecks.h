//===- AttrChecks.h - The attribute ranges of the contract ------*- C++ -*-===//
//
// One definition of the ranges docs/semantics.md gives C, g, K and the
// scale, shared by the user-level ops and the kernel-level ops they
// decompose into (a hand-written kernel op gets the same diagnostics).
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_IR_ATTRCHECKS_H
#define PISA_LIB_IR_ATTRCHECKS_H

#include "pisa/Analysis/PyramidLayout.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"

#include <cmath>

namespace mlir::pisa::detail {

/// C in [1, kMaxBlockSize], g in [2, kMaxBranching].
inline LogicalResult checkPyramidParams(Operation *op, int64_t blockSize,
                                        int64_t branching) {
  if (blockSize < 1 || blockSize > kMaxBlockSize)
    return op->emitOpError() << "expected block size C in [1, "
                             << kMaxBlockSize << "] but got " << blockSize;
  if (branching < 2 || branching > kMaxBranching)
    return op->emitOpError() << "expected branching g in [2, "
                             << kMaxBranching << "] but got " << branching;
  return success();
}

/// K in [3, kMaxTopK]: room for the forced blocks.
inline LogicalResult checkTopK(Operation *op, int64_t topK) {
  if (topK < 3 || topK > kMaxTopK)
    return op->emitOpError() << "expected topk K in [3, " << kMaxTopK
                             << "] (room for the forced blocks) but got "
                             << topK;
  return success();
}

/// A finite positive scale, when there is one.
inline LogicalResult checkScale(Operation *op, FloatAttr scale) {
  if (!scale)
    return success();
  double value = scale.getValueAsDouble();
  if (!(std::isfinite(value) && value > 0.0))
    return op->emitOpError()
           << "expected a finite positive scale but got " << value;
  return success();
}

} // namespace mlir::pisa::detail

#endif // PISA_LIB_IR_ATTRCHECKS_H
