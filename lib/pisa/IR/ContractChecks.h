//===- ContractChecks.h - Checks the op verifiers share ---------*- C++ -*-===//
//
// One definition of the ranges docs/semantics.md gives C, g, K and the
// scale, and of the shape relations, shared by the user-level ops and the
// kernel-level ops they decompose into (a hand-written kernel op gets the
// same diagnostics).
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_IR_CONTRACTCHECKS_H
#define PISA_LIB_IR_CONTRACTCHECKS_H

#include "pisa/Analysis/PyramidLayout.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypeInterfaces.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"

#include <climits>

#include <cmath>

namespace mlir::pisa::detail {

/// C in [1, kMaxBlockSize].
inline LogicalResult checkBlockSize(Operation *op, int64_t blockSize) {
  if (blockSize < 1 || blockSize > kMaxBlockSize)
    return op->emitOpError() << "expected block size C in [1, " << kMaxBlockSize
                             << "] but got " << blockSize;
  return success();
}

/// g in [2, kMaxBranching].
inline LogicalResult checkBranching(Operation *op, int64_t branching) {
  if (branching < 2 || branching > kMaxBranching)
    return op->emitOpError() << "expected branching g in [2, " << kMaxBranching
                             << "] but got " << branching;
  return success();
}

inline LogicalResult checkPyramidParams(Operation *op, int64_t blockSize,
                                        int64_t branching) {
  return failure(failed(checkBlockSize(op, blockSize)) ||
                 failed(checkBranching(op, branching)));
}

/// K in [3, kMaxTopK]: room for the forced blocks.
inline LogicalResult checkTopK(Operation *op, int64_t topK) {
  if (topK < 3 || topK > kMaxTopK)
    return op->emitOpError()
           << "expected topk K in [3, " << kMaxTopK
           << "] (room for the forced blocks) but got " << topK;
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

/// Emits "expected <what> of <a> (x) to match <b> (y)" when both extents
/// are static and differ.
inline LogicalResult checkSameDim(Operation *op, StringRef what,
                                  StringRef aName, int64_t a, StringRef bName,
                                  int64_t b) {
  if (!ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b)
    return op->emitOpError() << "expected " << what << " of " << aName << " ("
                             << a << ") to match " << bName << " (" << b << ")";
  return success();
}

/// Hq splits into whole GQA groups of Hkv (where they are static).
inline LogicalResult checkGroups(Operation *op, int64_t hq, int64_t hkv) {
  const bool hkvKnown = !ShapedType::isDynamic(hkv);
  if (hkvKnown && hkv < 1)
    return op->emitOpError() << "expected Hkv >= 1 but got " << hkv;
  if (hkvKnown && !ShapedType::isDynamic(hq) && hq % hkv != 0)
    return op->emitOpError() << "expected Hq (" << hq
                             << ") to be a multiple of Hkv (" << hkv << ")";
  return success();
}

/// The level an lse_score scores: level >= 1 whose children each cover at
/// most 2^31 - 1 keys (C g^(level - 2); keys have i32 positions, and the
/// fuzzer's level = 2^63 - 1 made a lowering loop over it), raw keys of
/// the queries' element type at level 1 and f32 summaries above.
inline LogicalResult checkScoredLevel(Operation *op, int64_t level,
                                      int64_t blockSize, int64_t branching,
                                      Type queryElement, Type childElement) {
  if (level < 1)
    return op->emitOpError() << "expected level >= 1 but got " << level;
  for (int64_t l = 2, span = blockSize; l < level; ++l) {
    if (span > INT32_MAX / branching)
      return op->emitOpError()
             << "expected a level whose children cover at most 2^31 - 1 "
                "keys (C g^(level - 2)) but got level "
             << level;
    span *= branching;
  }
  if (level == 1 && queryElement != childElement)
    return op->emitOpError() << "expected level-1 children (raw keys) to have "
                                "the queries' element type "
                             << queryElement << " but got " << childElement;
  if (level > 1 && !childElement.isF32())
    return op->emitOpError()
           << "expected level-" << level
           << " children (summaries) to be f32 but got " << childElement;
  return success();
}

} // namespace mlir::pisa::detail

#endif // PISA_LIB_IR_CONTRACTCHECKS_H
