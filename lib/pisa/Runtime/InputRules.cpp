//===- InputRules.cpp - rules on integer inputs that live on the device ---===//

#include "InputRules.h"

#include <stdio.h>
#include <stdlib.h>

bool pisa::runtime::checkCuSeqlens(const char *name, const int32_t *cu,
                                   int64_t entries, int64_t rows, char *message,
                                   size_t messageBytes) {
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
      snprintf(message, messageBytes,
               "%s[%lld] = %d is outside [%lld, %lld] (%s)", name, (long long)i,
               values[i], (long long)lowest, (long long)highest, why);
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

bool pisa::runtime::checkBlockTable(const int32_t *table, int64_t batch,
                                    int64_t maxPages, const int32_t *lengths,
                                    int64_t pageSize, int64_t numPages,
                                    char *message, size_t messageBytes) {
  // owner[p] = 1 + the table entry (b * maxPages + m) that named page p.
  int64_t *owner = static_cast<int64_t *>(
      calloc(size_t(numPages > 0 ? numPages : 1), sizeof(int64_t)));
  if (!owner) {
    snprintf(message, messageBytes, "out of host memory checking block_table");
    return false;
  }
  bool holds = true;
  for (int64_t b = 0; b < batch && holds; ++b) {
    int64_t keys = lengths[b] < 0 ? 0 : lengths[b];
    if (keys > maxPages * pageSize)
      keys = maxPages * pageSize;
    const int64_t pages = (keys + pageSize - 1) / pageSize;
    for (int64_t m = 0; m < pages && holds; ++m) {
      const int64_t page = table[b * maxPages + m];
      if (page < 0 || page >= numPages) {
        snprintf(message, messageBytes,
                 "block_table[%lld][%lld] = %lld is outside the pool's %lld "
                 "pages (sequence %lld holds %lld keys)",
                 (long long)b, (long long)m, (long long)page,
                 (long long)numPages, (long long)b, (long long)keys);
        holds = false;
      } else if (owner[page]) {
        const int64_t first = owner[page] - 1;
        snprintf(message, messageBytes,
                 "page %lld is named by block_table[%lld][%lld] and "
                 "block_table[%lld][%lld]: a page holds the keys of one "
                 "position of one live sequence",
                 (long long)page, (long long)(first / maxPages),
                 (long long)(first % maxPages), (long long)b, (long long)m);
        holds = false;
      } else {
        owner[page] = 1 + b * maxPages + m;
      }
    }
  }
  free(owner);
  return holds;
}
