//===- Pipelines.h - pisa's registered pass pipelines -----------*- C++ -*-===//

#ifndef PISA_PIPELINES_PIPELINES_H
#define PISA_PIPELINES_PIPELINES_H

namespace mlir {
class OpPassManager;

namespace pisa {

/// pisa-cpu-pipeline: pisa ops in func.func bodies down to the LLVM dialect,
/// ready for mlir::ExecutionEngine (functions marked llvm.emit_c_interface
/// get _mlir_ciface_ entry points). Buffers are freed by ownership-based
/// deallocation; results returned from a function are owned by the caller.
void buildPisaCPUPipeline(OpPassManager &pm);

/// Registers the pipelines above with the global pipeline registry.
void registerPisaPipelines();

} // namespace pisa
} // namespace mlir

#endif // PISA_PIPELINES_PIPELINES_H
