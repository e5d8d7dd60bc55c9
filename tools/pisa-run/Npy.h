//===- Npy.h - Minimal .npy reader and writer -------------------*- C++ -*-===//
//
// NumPy's .npy format (versions 1-3), little-endian C-order arrays of the
// dtypes pisa-run exchanges: f32, f16 (inputs) and i32 (outputs).
//
//===----------------------------------------------------------------------===//

#ifndef PISA_TOOLS_PISARUN_NPY_H
#define PISA_TOOLS_PISARUN_NPY_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pisatool::npy {

enum class DType { F32, F16, I32 };

/// Short NumPy name of a dtype: "float32", "float16", "int32".
const char *dtypeName(DType dtype);
size_t dtypeSize(DType dtype);

struct Array {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data; ///< Raw little-endian elements, C order.

  int64_t numElements() const;
};

/// Reads `path`; errors name the file and what is wrong with it.
llvm::Expected<Array> read(llvm::StringRef path);

/// Writes `array` to `path` atomically (a temporary file renamed into
/// place), so a failure never leaves a partial file behind.
llvm::Error write(llvm::StringRef path, const Array &array);

} // namespace pisatool::npy

#endif // PISA_TOOLS_PISARUN_NPY_H
