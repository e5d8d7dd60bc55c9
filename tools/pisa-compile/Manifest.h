//===- Manifest.h - Entry points of an AOT library --------------*- C++ -*-===//

#ifndef PISA_TOOLS_PISACOMPILE_MANIFEST_H
#define PISA_TOOLS_PISACOMPILE_MANIFEST_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace pisatool {

struct Argument {
  std::string name;  ///< "arg0", ...
  std::string kind;  ///< "memref" (device pointer) or "index"
  std::string dtype; ///< f32, f16, bf16, i32 for memrefs
  std::vector<int64_t> shape;
};

struct EntryPoint {
  std::string function, symbol;
  std::vector<Argument> arguments;
  Argument result;
};

struct Manifest {
  std::vector<EntryPoint> entryPoints;
};

/// Describes the public functions of `module` and marks them
/// llvm.emit_c_interface. They must take statically shaped tensors or
/// index values and return one statically shaped tensor.
llvm::Expected<Manifest> describeEntryPoints(mlir::ModuleOp module);

/// Links host object code with the CUDA runtime into `output` (atomically).
llvm::Error linkSharedLibrary(llvm::StringRef object, llvm::StringRef output);

/// Writes <output stem>.json and <output stem>.h.
llvm::Error writeManifest(const Manifest &manifest, llvm::StringRef output);

} // namespace pisatool

#endif // PISA_TOOLS_PISACOMPILE_MANIFEST_H
