//===- InitAllPasses.cpp - Passes and pipelines pisa uses -----------------===//

#include "pisa/InitAllPasses.h"
#include "pisa/Conversion/Passes.h"
#include "pisa/Pipelines/Pipelines.h"
#include "pisa/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

void mlir::pisa::registerAllPasses() {
  registerPisaPasses();
  registerPisaConversionPasses();
  registerPisaPipelines();

  // Generic cleanups and the upstream stages of pisa's pipelines.
  mlir::registerTransformsPasses();
  bufferization::registerBufferizationPasses();
  bufferization::registerBufferizationPipelines();
  registerConvertLinalgToLoopsPass();
  memref::registerExpandStridedMetadataPass();
  registerLowerAffinePass();
  registerSCFToControlFlowPass();
  registerConvertMathToLLVMPass();
  registerArithToLLVMConversionPass();
  registerConvertIndexToLLVMPass();
  registerFinalizeMemRefToLLVMConversionPass();
  registerConvertFuncToLLVMPass();
  registerConvertControlFlowToLLVMPass();
  registerReconcileUnrealizedCastsPass();
  registerGPUPasses();
  registerGpuToLLVMConversionPass();
  registerConvertGpuOpsToNVVMOps();
  registerConvertNVGPUToNVVMPass();
  registerConvertNVVMToLLVMPass();
  gpu::registerGPUToNVVMPipeline();
}
