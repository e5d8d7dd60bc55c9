//===- InitAllPasses.cpp - Passes and pipelines pisa uses -----------------===//

#include "pisa/InitAllPasses.h"
#include "pisa/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

void mlir::pisa::registerAllPasses() {
  registerPisaPasses();

  // Generic cleanups and the upstream stages of pisa's pipelines.
  mlir::registerTransformsPasses();
  bufferization::registerBufferizationPasses();
}
