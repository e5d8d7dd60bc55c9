//===- Pipelines.h - pisa's registered pass pipelines -----------*- C++ -*-===//

#ifndef PISA_PIPELINES_PIPELINES_H
#define PISA_PIPELINES_PIPELINES_H

#include <cstdint>
#include <string>
#include <vector>

namespace mlir {
class OpPassManager;

namespace pisa {

/// pisa-cpu-pipeline: pisa ops in func.func bodies down to the LLVM dialect,
/// ready for mlir::ExecutionEngine (functions marked llvm.emit_c_interface
/// get _mlir_ciface_ entry points). Buffers are freed by ownership-based
/// deallocation; results returned from a function are owned by the caller.
void buildPisaCPUPipeline(OpPassManager &pm);

/// Options of pisa-lower-to-nvvm-pipeline.
struct PisaGPUPipelineOptions {
  std::string chip = "sm_90a";
  std::string features = "+ptx80";
  /// isa (PTX text), bin (cubin) or fatbin.
  std::string format = "fatbin";
  /// q-tile of --pisa-select-schedule for ops that have no schedule yet.
  int64_t qTile = 4;
  /// attention-union-queries of --pisa-configure-kernels (0: none).
  int64_t attentionUnionQueries = 0;
  /// kernel-config of --pisa-configure-kernels: OP:FIELD=VALUE entries.
  std::vector<std::string> kernelConfig;
  /// grad-dq-from-scores of --pisa-decompose-to-kernels: the backward's dq
  /// from the key kernel's dS tiles where the kernels take the sizes.
  bool gradDqFromScores = false;
};

/// pisa-lower-to-nvvm-pipeline: schedules hier_topk ops that have no
/// #pisa.schedule, lowers pisa to gpu kernels, bufferizes the host
/// functions, makes their GPU work asynchronous, and hands the module to
/// the upstream gpu-lower-to-nvvm-pipeline (host LLVM dialect + gpu.binary).
void buildPisaGPUPipeline(OpPassManager &pm,
                          const PisaGPUPipelineOptions &options);
/// Its two halves: up to bufferized host functions on gpu.alloc'd buffers
/// and synchronous launches (where pisa-compile plans the workspace and
/// turns results into out-parameters), and from there to LLVM + binary.
void buildPisaGPUHostPipeline(OpPassManager &pm,
                              const PisaGPUPipelineOptions &options);
void buildPisaGPUBackendPipeline(OpPassManager &pm,
                                 const PisaGPUPipelineOptions &options);

/// One-shot bufferization of whole modules with identity layouts at
/// function boundaries, as both pipelines' host code needs.
void addModuleBufferization(OpPassManager &pm);

/// Registers the pipelines above with the global pipeline registry.
void registerPisaPipelines();
void registerPisaGPUPipeline();

} // namespace pisa
} // namespace mlir

#endif // PISA_PIPELINES_PIPELINES_H
