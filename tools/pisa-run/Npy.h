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
#include "llvm/Support/raw_ostream.h"

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

/// Reads `path`, a regular file; errors name the file and what is wrong
/// with it. The header is parsed as strictly as NumPy does (exactly the
/// keys descr, fortran_order and shape, each once) and its size checked
/// against the file before anything is copied.
llvm::Expected<Array> read(llvm::StringRef path);

/// Writes `array` in .npy format (version 1.0) to `os`.
void write(llvm::raw_ostream &os, const Array &array);

} // namespace pisatool::npy

#endif // PISA_TOOLS_PISARUN_NPY_H
