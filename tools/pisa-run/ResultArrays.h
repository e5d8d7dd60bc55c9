//===- ResultArrays.h - .npy arrays in and out of compiled calls -*- C++
//-*-===//
//
// Inputs as memref descriptors over .npy data, results (any strides) as
// C-order .npy arrays, and writing several outputs all or nothing.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_TOOLS_PISARUN_RESULTARRAYS_H
#define PISA_TOOLS_PISARUN_RESULTARRAYS_H

#include "Npy.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

namespace pisatool {

/// IEEE half bits to float.
float halfToFloat(uint16_t h);

/// Writes `arrays` to their paths (empty paths skipped) as one
/// mlir::pisa::OutputSet: nothing reaches a path unless every array was
/// written, and a failure leaves existing files as they were.
llvm::Error
writeAll(llvm::ArrayRef<std::pair<std::string, npy::Array *>> arrays);

template <typename T, int Rank = 4>
StridedMemRefType<T, Rank> describe(const npy::Array &a) {
  StridedMemRefType<T, Rank> desc;
  desc.basePtr = desc.data =
      reinterpret_cast<T *>(const_cast<uint8_t *>(a.data.data()));
  desc.offset = 0;
  int64_t stride = 1;
  for (int i = Rank - 1; i >= 0; --i) {
    desc.sizes[i] = a.shape[i];
    desc.strides[i] = stride;
    stride *= a.shape[i];
  }
  return desc;
}

/// A result memref (any strides) as a C-order .npy array of `dtype`;
/// `convert` turns one element into the bytes written.
template <typename T, int Rank, typename Out>
npy::Array toNpy(const StridedMemRefType<T, Rank> &m, npy::DType dtype,
                 Out (*convert)(T)) {
  npy::Array a;
  a.dtype = dtype;
  a.shape.assign(m.sizes, m.sizes + Rank);
  a.data.resize(a.numElements() * sizeof(Out));
  Out *dst = reinterpret_cast<Out *>(a.data.data());
  int64_t index[Rank] = {};
  for (int64_t n = 0, e = a.numElements(); n < e; ++n) {
    int64_t at = m.offset;
    for (int r = 0; r < Rank; ++r)
      at += index[r] * m.strides[r];
    *dst++ = convert(m.data[at]);
    for (int r = Rank - 1; r >= 0 && ++index[r] == m.sizes[r]; --r)
      index[r] = 0;
  }
  return a;
}

template <typename T> T same(T x) { return x; }
inline float fromHalf(uint16_t h) { return halfToFloat(h); }

/// A result of the inputs' element type (float32, or float16 as uint16_t)
/// the program allocated, as a float32 array; frees its buffer.
template <typename E, int Rank>
npy::Array takeAsF32(StridedMemRefType<E, Rank> &m) {
  npy::Array a;
  if constexpr (std::is_same_v<E, uint16_t>)
    a = toNpy(m, npy::DType::F32, &fromHalf);
  else
    a = toNpy(m, npy::DType::F32, &same<float>);
  std::free(m.basePtr);
  return a;
}

/// A float32 result the program allocated as an array; frees its buffer.
template <int Rank> npy::Array takeF32(StridedMemRefType<float, Rank> &m) {
  npy::Array a = toNpy(m, npy::DType::F32, &same<float>);
  std::free(m.basePtr);
  return a;
}

} // namespace pisatool

#endif // PISA_TOOLS_PISARUN_RESULTARRAYS_H
