//===- ForcedBlocks.h - The forced leaf blocks of a query -------*- C++ -*-===//
//
// Step 3 of docs/semantics.md, section 3: every query keeps the forced
// blocks F = {0, b_t - 1, b_t} within 0..b_t, without duplicates, and the
// other causal leaves compete for the K - |F| remaining slots. The one
// definition of that rule: the CPU loops and the GPU kernels (both walks,
// the stage-2 pair filter, the final selection) build it from here.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_COMMON_FORCEDBLOCKS_H
#define PISA_LIB_CONVERSION_COMMON_FORCEDBLOCKS_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::pisa::detail {

/// b_t - 1 clamped at 0 (then it is block 0, already in F).
Value previousBlock(ImplicitLocOpBuilder &b, Value bt);

/// Whether leaf `node` is in F, given `previous` = previousBlock(bt) (i1).
Value isForcedBlock(ImplicitLocOpBuilder &b, Value node, Value bt,
                    Value previous);

/// Whether leaf `node` competes for the remaining slots: causal
/// (node <= b_t) and not forced (i1).
Value isLeafContender(ImplicitLocOpBuilder &b, Value node, Value bt,
                      Value previous);

/// |F| = 1 + (b_t >= 1) + (b_t >= 2), as an index.
Value forcedBlockCount(ImplicitLocOpBuilder &b, Value bt);

/// How many blocks of F lie below contender `x` (an index): block 0
/// always (a contender is never forced, so it is above 0), `previous` =
/// previousBlock(bt) when b_t >= 2 and below x, b_t when b_t >= 1 and
/// below x. A kept contender's place in the row is the kept contenders
/// below it plus this.
Value forcedBlocksBelow(ImplicitLocOpBuilder &b, Value x, Value bt,
                        Value previous);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_COMMON_FORCEDBLOCKS_H
