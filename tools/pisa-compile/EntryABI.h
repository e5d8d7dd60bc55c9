//===- EntryABI.h - The C entry points of an AOT library ---------*- C++
//-*-===//
//
// Turns each entry function into the call of PisaRuntime.h:
//   pisa_F(const PisaCall *, inputs..., index arguments..., result)
// in two steps around the backend pipeline: on the bufferized host code,
// the result becomes an out-parameter and the workspace is planned; on the
// lowered LLVM module, the wrapper that checks a call (EntryTable.h) and
// calls the lowered function is added.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_TOOLS_PISACOMPILE_ENTRYABI_H
#define PISA_TOOLS_PISACOMPILE_ENTRYABI_H

#include "Manifest.h"

namespace pisatool {

/// On bufferized host functions (gpu.alloc'd buffers, synchronous GPU ops):
/// the returned gpu.alloc becomes a last memref argument that the kernels
/// write in place, and every other gpu.alloc is counted into the entry's
/// workspace (each rounded up to the runtime's alignment).
llvm::Error planEntryPoints(mlir::ModuleOp module, Manifest &manifest);

/// On the lowered module: pisa_F and pisa_F_workspace_size for each entry,
/// and its constant entry table.
llvm::Error emitEntryWrappers(mlir::ModuleOp module, const Manifest &manifest);

} // namespace pisatool

#endif // PISA_TOOLS_PISACOMPILE_ENTRYABI_H
