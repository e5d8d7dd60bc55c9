//===- InputRules.cpp - rules on integer inputs that live on the device ---===//

#include "InputRules.h"

#include <stdio.h>

bool pisa::runtime::checkCuSeqlens(const char *name, const int32_t *cu,
                                   int64_t entries, int64_t rows,
                                   char *message, size_t messageBytes) {
  if (cu[0] != 0) {
    snprintf(message, messageBytes, "%s[0] is %d, expected 0", name, cu[0]);
    return false;
  }
  for (int64_t i = 1; i < entries; ++i)
    if (cu[i] < cu[i - 1]) {
      snprintf(message, messageBytes,
               "%s[%lld] = %d is below %s[%lld] = %d: cu_seqlens must be "
               "non-decreasing",
               name, (long long)i, cu[i], name, (long long)(i - 1), cu[i - 1]);
      return false;
    }
  if (cu[entries - 1] != rows) {
    snprintf(message, messageBytes,
             "%s[%lld] = %d, expected %lld (the rows its tensor packs)", name,
             (long long)(entries - 1), cu[entries - 1], (long long)rows);
    return false;
  }
  return true;
}

bool pisa::runtime::checkQueriesFitKeys(const int32_t *cuQ, const int32_t *cuK,
                                        int64_t entries, char *message,
                                        size_t messageBytes) {
  for (int64_t b = 0; b + 1 < entries; ++b) {
    int64_t queries = int64_t(cuQ[b + 1]) - cuQ[b];
    int64_t keys = int64_t(cuK[b + 1]) - cuK[b];
    if (queries > keys) {
      snprintf(message, messageBytes,
               "sequence %lld has %lld queries but %lld keys: a sequence's "
               "queries are its last positions, so Nq_b <= N_b",
               (long long)b, (long long)queries, (long long)keys);
      return false;
    }
  }
  return true;
}

bool pisa::runtime::checkRange(const char *name, const int32_t *values,
                               int64_t count, int64_t lowest, int64_t highest,
                               const char *why, char *message,
                               size_t messageBytes) {
  for (int64_t i = 0; i < count; ++i)
    if (values[i] < lowest || values[i] > highest) {
      snprintf(message, messageBytes, "%s[%lld] = %d is outside [%lld, %lld] (%s)",
               name, (long long)i, values[i], (long long)lowest,
               (long long)highest, why);
      return false;
    }
  return true;
}

bool pisa::runtime::checkAppendOrder(const int32_t *from, const int32_t *to,
                                     int64_t count, char *message,
                                     size_t messageBytes) {
  for (int64_t b = 0; b < count; ++b)
    if (from[b] > to[b]) {
      snprintf(message, messageBytes,
               "from[%lld] = %d is above to[%lld] = %d: an append adds keys "
               "from .. to - 1",
               (long long)b, from[b], (long long)b, to[b]);
      return false;
    }
  return true;
}
