//===- CuSeqlensRules.h - section 7's rules on cu_seqlens values -*- C++ -*-===//
//
// What only the values of a packed batch's cu_seqlens decide
// (docs/semantics.md, section 7), checked on the host copy that a
// validating call reads back. Plain C++ without the standard library, like
// the rest of the runtime; the messages name the entry and the rule.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_RUNTIME_CUSEQLENSRULES_H
#define PISA_LIB_RUNTIME_CUSEQLENSRULES_H

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

} // namespace pisa::runtime

#endif // PISA_LIB_RUNTIME_CUSEQLENSRULES_H
