//===- GPUPipeline.cpp - pisa-lower-to-nvvm-pipeline ----------------------===//
//
// pisa ops in host functions -> kernel-level ops on tensors (one per
// kernel of the schedule) -> one-shot bufferization and ownership-based
// deallocation -> gpu kernels + launches on device buffers (tile products
// as vector.contract, then nvgpu/nvvm mma.sync) -> async GPU ops ->
// upstream gpu-lower-to-nvvm-pipeline, whose tail serialises the kernels
// (sm_90a by default) into a gpu.binary.
//
//===----------------------------------------------------------------------===//

#include "pisa/Conversion/Passes.h"
#include "pisa/Pipelines/Pipelines.h"
#include "pisa/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::pisa::buildPisaGPUHostPipeline(
    OpPassManager &pm, const PisaGPUPipelineOptions &options) {
  PisaCheckGPUTargetOptions target;
  target.chip = options.chip;
  target.format = options.format;
  pm.addPass(createPisaCheckGPUTarget(target));
  PisaSelectScheduleOptions schedule;
  schedule.qTile = options.qTile;
  schedule.keepExisting = true;
  pm.addPass(createPisaSelectSchedule(schedule));
  PisaDecomposeToKernelsOptions decompose;
  decompose.gradDqFromScores = options.gradDqFromScores;
  pm.addPass(createPisaDecomposeToKernels(decompose));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  addModuleBufferization(pm);
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createPisaFuseDecodeAppend());
  PisaConfigureKernelsOptions configs;
  configs.chip = options.chip;
  configs.attentionUnionQueries = options.attentionUnionQueries;
  configs.kernelConfig.assign(options.kernelConfig.begin(),
                              options.kernelConfig.end());
  pm.addPass(createPisaConfigureKernels(configs));
  ConvertPisaToGPUOptions kernels;
  kernels.chip = options.chip;
  pm.addPass(createConvertPisaToGPU(kernels));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Warp tile products (vector.contract) to nvgpu/nvvm mma.sync.
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertVectorToMmaSync());
  pm.addNestedPass<gpu::GPUModuleOp>(createCanonicalizerPass());
}

void mlir::pisa::buildPisaGPUBackendPipeline(
    OpPassManager &pm, const PisaGPUPipelineOptions &options) {
  pm.addNestedPass<func::FuncOp>(createGpuAsyncRegionPass());
  // Before upstream's math lowering would make every exp2 libdevice's.
  pm.addNestedPass<gpu::GPUModuleOp>(createPisaFastExp2ToNVVM());
  gpu::GPUToNVVMPipelineOptions nvvm;
  nvvm.cubinChip = options.chip;
  nvvm.cubinFeatures = options.features;
  nvvm.cubinFormat = options.format;
  gpu::buildLowerToNVVMPassPipeline(pm, nvvm);
}

void mlir::pisa::buildPisaGPUPipeline(OpPassManager &pm,
                                      const PisaGPUPipelineOptions &options) {
  buildPisaGPUHostPipeline(pm, options);
  buildPisaGPUBackendPipeline(pm, options);
}

namespace {
struct GPUPipelineCLOptions : public PassPipelineOptions<GPUPipelineCLOptions> {
  Option<std::string> chip{*this, "chip", llvm::cl::desc("GPU chip"),
                           llvm::cl::init("sm_90a")};
  Option<std::string> features{*this, "features",
                               llvm::cl::desc("PTX features"),
                               llvm::cl::init("+ptx80")};
  Option<std::string> format{*this, "format",
                             llvm::cl::desc("isa | bin | fatbin"),
                             llvm::cl::init("fatbin")};
  Option<int64_t> qTile{*this, "q-tile",
                        llvm::cl::desc("q-tile for unscheduled ops"),
                        llvm::cl::init(4)};
  Option<int64_t> attentionUnionQueries{
      *this, "attention-union-queries",
      llvm::cl::desc("sparse attention on query tiles of this many queries "
                     "where its kernel takes the sizes (0: none)"),
      llvm::cl::init(0)};
  ListOption<std::string> kernelConfig{
      *this, "kernel-config",
      llvm::cl::desc("fields asked of every op of one kind: OP:FIELD=VALUE "
                     "(--pisa-configure-kernels)")};
  Option<bool> gradDqFromScores{
      *this, "grad-dq-from-scores",
      llvm::cl::desc("the backward's dq from the key kernel's dS tiles "
                     "where the kernels take the sizes"),
      llvm::cl::init(false)};
};
} // namespace

void mlir::pisa::registerPisaGPUPipeline() {
  PassPipelineRegistration<GPUPipelineCLOptions>(
      "pisa-lower-to-nvvm-pipeline",
      "lower pisa to gpu kernels, NVVM and a gpu.binary (sm_90a by default), "
      "with host code in the LLVM dialect",
      [](OpPassManager &pm, const GPUPipelineCLOptions &cl) {
        PisaGPUPipelineOptions options;
        options.chip = cl.chip;
        options.features = cl.features;
        options.format = cl.format;
        options.qTile = cl.qTile;
        options.attentionUnionQueries = cl.attentionUnionQueries;
        options.gradDqFromScores = cl.gradDqFromScores;
        options.kernelConfig.assign(cl.kernelConfig.begin(),
                                    cl.kernelConfig.end());
        buildPisaGPUPipeline(pm, options);
      });
}
