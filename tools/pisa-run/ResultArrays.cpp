//===- ResultArrays.cpp - .npy arrays in and out of compiled calls --------===//

#include "ResultArrays.h"

#include "pisa/Support/OutputFiles.h"

#include "llvm/ADT/STLExtras.h"

#include <cstdio>
#include <cstring>
#include <vector>

using namespace pisatool;

float pisatool::halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | exp << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

llvm::Error pisatool::writeAll(
    llvm::ArrayRef<std::pair<std::string, npy::Array *>> arrays) {
  std::vector<std::string> paths;
  for (auto &entry : arrays)
    paths.push_back(entry.first);
  auto outputs = mlir::pisa::OutputSet::create(paths);
  if (!outputs)
    return outputs.takeError();
  for (auto [i, entry] : llvm::enumerate(arrays))
    if (llvm::raw_ostream *os = outputs->os(i))
      npy::write(*os, *entry.second);
  return outputs->commit();
}
