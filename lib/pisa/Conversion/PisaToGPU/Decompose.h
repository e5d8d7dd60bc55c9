//===- Decompose.h - Each pisa op's kernel-level ops ------------*- C++ -*-===//
//
// The decomposition of each user-level op into the kernel-level ops of
// PisaKernelOps.td (KernelDecompositions.cpp), called by the op's
// KernelLoweringOpInterface model (KernelLowering.cpp). Each replaces the
// op, inserting host assertions on sizes known only at run time first.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_DECOMPOSE_H
#define PISA_LIB_CONVERSION_PISATOGPU_DECOMPOSE_H

#include "pisa/IR/PisaOps.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::pisa::detail {

/// hier_topk's plan (schedule, kernel variants) can be made: emits why not.
LogicalResult verifySelectionPlan(HierTopKOp op);

/// Each replaces an op that passed its checks (the GPU limits; for
/// hier_topk, verifySelectionPlan).
void decompose(RewriterBase &rewriter, PyramidBuildOp op);
void decompose(RewriterBase &rewriter, PyramidBuildVarlenOp op);
void decompose(RewriterBase &rewriter, LseScoreOp op);
void decompose(RewriterBase &rewriter, HierTopKOp op);
void decompose(RewriterBase &rewriter, HierTopKVarlenOp op);
void decompose(RewriterBase &rewriter, PyramidAppendOp op);
void decompose(RewriterBase &rewriter, DecodeSelectOp op);
void decompose(RewriterBase &rewriter, SparseAttentionOp op);
void decompose(RewriterBase &rewriter, SparseAttentionGradOp op);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_DECOMPOSE_H
