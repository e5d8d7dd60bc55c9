//===- PackedSequences.h - Varlen batches inside kernels --------*- C++ -*-===//
//
// Kernels over a packed varlen batch (docs/semantics.md, section 7) are
// launched over the whole batch, sized from Tq, Tk and B alone, and each
// warp or block finds its sequence on the device by a binary search of
// cu_seqlens: nothing is read back to the host, so a call can be captured
// in a CUDA graph and replayed with other lengths.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_SELECTION_PACKEDSEQUENCES_H
#define PISA_LIB_CONVERSION_PISATOGPU_SELECTION_PACKEDSEQUENCES_H

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::pisa::detail {

/// A packed buffer [T, H, X] as the [1, H, T, X] view the batched kernels
/// index (memref.expand_shape + memref.transpose, no copy).
Value viewAsBatchOfOne(ImplicitLocOpBuilder &b, Value packed);

/// cu[at] of an i32 buffer, as an index (sign-extended).
Value cuEntry(ImplicitLocOpBuilder &b, Value cu, Value at);

/// The largest s in [0, numSeqs) with firstSlot(s) <= slot, for a
/// non-decreasing firstSlot; 0 when none is (the caller's rules catch it).
Value findSequence(
    ImplicitLocOpBuilder &b, Value numSeqs, Value slot,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> firstSlot);

/// Whether cu_seqlens keep every rule of docs/semantics.md section 7:
/// cu_k[0] = 0, non-decreasing, cu_k[B] = Tk, and with `cuQueries` the same
/// for cu_q and Tq plus Nq_b <= N_b. One pass over the B + 1 entries (each
/// warp or block checks the whole batch, so that a broken batch is refused
/// whole, as on the CPU).
Value batchRulesHold(ImplicitLocOpBuilder &b, Value cuKeys, Value numKeyRows,
                     Value cuQueries = Value(), Value numQueryRows = Value());

/// Sequence `seq`'s keys: rows first .. first + count - 1, and whether
/// cu_k keeps them inside the Tk rows (0 <= cu_k[s] <= cu_k[s+1] <= Tk).
struct PackedKeys {
  Value first, count, valid;
};
PackedKeys packedKeys(ImplicitLocOpBuilder &b, Value cuKeys, Value numKeyRows,
                      Value seq);

/// The sequence of packed query row `row` (< Tq): its keys, the row's
/// position t = N_b - Nq_b + (row - cu_q[b]), and whether the rules of
/// section 7 hold (the whole batch's, batchRulesHold, and the sequence's).
/// `batchRules`, when given, is batchRulesHold's result computed once for
/// several rows (or true where only the row's own sequence must be sound).
struct QueryRowSequence {
  Value seq;
  PackedKeys keys;
  Value position, valid;
};
QueryRowSequence sequenceOfQueryRow(ImplicitLocOpBuilder &b, Value cuQueries,
                                    Value cuKeys, Value numQueryRows,
                                    Value numKeyRows, Value row,
                                    Value batchRules = Value());

/// Pyramid kernels number the nodes of one level over the whole batch:
/// sequence s's nodes of a level whose nodes span `span` leaves start at
/// slot floor(floor(cu_k[s] / C) / span) + s. The ranges never overlap (an
/// interval of m leaves meets at least ceil(m / span) aligned spans), and
/// floor(floor(Tk / C) / span) + B slots cover the batch.
Value firstNodeSlot(ImplicitLocOpBuilder &b, Value firstKey, Value seq,
                    int64_t blockSize, Value span);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_SELECTION_PACKEDSEQUENCES_H
