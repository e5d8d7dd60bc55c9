//===- PyramidLayout.cpp - Level sizes and offsets of a key pyramid -------===//

#include "pisa/Analysis/PyramidLayout.h"

#include <cassert>
#include <cstdint>

using namespace mlir::pisa;

PyramidLayout::PyramidLayout(int64_t numKeys, int64_t blockSize,
                             int64_t branching)
    : keys(numKeys), block(blockSize), fan(branching) {
  assert(numKeys >= 1 && blockSize >= 1 && branching >= 2 &&
         "invalid pyramid parameters");
  int64_t levelSize = ceilDiv(numKeys, blockSize);
  int64_t span = 1;
  while (true) {
    sizes.push_back(levelSize);
    offsets.push_back(total);
    spans.push_back(span);
    total += levelSize;
    if (levelSize == 1)
      break;
    levelSize = ceilDiv(levelSize, branching);
    // Saturates only past 2^63 keys per node, where no index is formed.
    span = span > INT64_MAX / branching ? INT64_MAX : span * branching;
  }
}

int64_t mlir::pisa::varlenPyramidRows(int64_t numKeys, int64_t numSequences,
                                      int64_t blockSize) {
  return 2 * (numKeys / blockSize) + kVarlenRowsPerSequence * numSequences;
}
