//===- PisaToGPU.h - pisa to gpu kernels patterns ---------------*- C++ -*-===//

#ifndef PISA_CONVERSION_PISATOGPU_PISATOGPU_H
#define PISA_CONVERSION_PISATOGPU_PISATOGPU_H

namespace mlir {
class ModuleOp;
class RewritePatternSet;

namespace pisa {

/// pisa.pyramid_build to one leaf kernel and one kernel per upper level.
void populatePyramidBuildToGPUPatterns(RewritePatternSet &patterns);

/// Annotated pisa.hier_topk to the kernels of its #pisa.schedule.
void populateHierTopKToGPUPatterns(RewritePatternSet &patterns);

void populatePisaToGPUConversionPatterns(RewritePatternSet &patterns);

/// Frees, before every return, the device buffers the conversion allocated
/// for values that the function does not return (the pyramid).
void freeTransientDeviceBuffers(ModuleOp module);

} // namespace pisa
} // namespace mlir

#endif // PISA_CONVERSION_PISATOGPU_PISATOGPU_H
