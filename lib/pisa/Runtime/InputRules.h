//===- InputRules.h - rules on integer inputs that live on the device -*- C++
//-*-===//
//
// What only the values of a call's integer inputs decide: a packed batch's
// cu_seqlens (docs/semantics.md, section 7), a decode batch's seq_lens and
// an append's from/to (section 4), checked on the host copies that a
// validating call reads back. Plain C++ without the standard library, like
// the rest of the runtime; the messages name the entry and the rule.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_RUNTIME_INPUTRULES_H
#define PISA_LIB_RUNTIME_INPUTRULES_H

#include <stddef.h>
#include <stdint.h>

namespace pisa::runtime {

/// `cu` ([entries] values, entries = B + 1 >= 1) of argument `name` packs
/// `rows` rows: cu[0] = 0, non-decreasing, cu[B] = rows. Returns true, or
/// false with the broken rule in `message`.
bool checkCuSeqlens(const char *name, const int32_t *cu, int64_t entries,
                    int64_t rows, char *message, size_t messageBytes);

/// Every sequence has no more queries than keys: cuQ[b+1] - cuQ[b] <=
/// cuK[b+1] - cuK[b] (both already checked by checkCuSeqlens).
bool checkQueriesFitKeys(const int32_t *cuQ, const int32_t *cuK,
                         int64_t entries, char *message, size_t messageBytes);

/// Every value of `values` ([count]) of argument `name` lies in [lowest,
/// highest]; `why` says what the bounds are.
bool checkRange(const char *name, const int32_t *values, int64_t count,
                int64_t lowest, int64_t highest, const char *why, char *message,
                size_t messageBytes);

/// The block table `table` ([batch, maxPages]) of a paged cache of
/// `numPages` pages of `pageSize` keys: for every sequence b, the entries
/// below ceil(lengths[b] / pageSize) (lengths clamped to [0, maxPages x
/// pageSize]) lie in [0, numPages) and no page is named twice among them
/// all (two live sequences, or one twice, would share keys).
bool checkBlockTable(const int32_t *table, int64_t batch, int64_t maxPages,
                     const int32_t *lengths, int64_t pageSize, int64_t numPages,
                     char *message, size_t messageBytes);

/// from[b] <= to[b] for every b < count (an append never shrinks a cache).
bool checkAppendOrder(const int32_t *from, const int32_t *to, int64_t count,
                      char *message, size_t messageBytes);

} // namespace pisa::runtime

#endif // PISA_LIB_RUNTIME_INPUTRULES_H
