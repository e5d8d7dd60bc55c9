//===- Decompose.h - Each pisa op's kernel-level ops ------------*- C++ -*-===//
//
// The decomposition of each user-level op into the kernel-level ops of
// PisaKernelOps.td (KernelDecompositions.cpp; sparse attention's in
// Attention/AttentionDecompositions.cpp), called by the op's
// KernelLoweringOpInterface model (KernelLowering.cpp). Each replaces the
// op, inserting host assertions on sizes known only at run time first.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_DECOMPOSE_H
#define PISA_LIB_CONVERSION_PISATOGPU_DECOMPOSE_H

#include "pisa/IR/PisaOps.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
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
void decompose(RewriterBase &rewriter, SparseAttentionVarlenOp op);
void decompose(RewriterBase &rewriter, SparseAttentionGradVarlenOp op);

/// Shared by the decompositions (KernelDecompositions.cpp).

/// tensor.empty of `shape` (static extents, kDynamic where `sizes` gives the
/// value) and `elem`.
Value empty(ImplicitLocOpBuilder &b, ArrayRef<int64_t> shape, Type elem,
            ArrayRef<Value> sizes);

/// Dimension xDim of `x` equals dimension yDim of `y`: a host assertion
/// ("<opName>: <what>") when either is dynamic (the verifier compared the
/// static ones).
void requireSameExtent(ImplicitLocOpBuilder &b, StringRef opName, Value x,
                       int64_t xDim, Value y, int64_t yDim, StringRef what);

/// A result's static extents that the operands give only at run time must
/// agree with them: the kernels size their grids and writes from the
/// operands, so a smaller result would be written past its end. `sizes`
/// are the result's extents as the operands give them (null: not given);
/// `what` names the result in the message.
void requireResultSizes(ImplicitLocOpBuilder &b, StringRef opName,
                        RankedTensorType type, ArrayRef<Value> sizes,
                        StringRef what = "result");

/// The size rules of a packed varlen batch the host can check (its
/// cu_seqlens' contents stay on the device, where the kernels check them).
/// `cuKeysName` names cu_k in the messages. Returns R = 2 floor(Tk / C) +
/// 32 B, the pyramid's rows.
Value requireVarlenSizes(ImplicitLocOpBuilder &b, StringRef opName,
                         StringRef cuKeysName, Value cuKeys, Value keys,
                         int64_t blockSize, Value cuQueries = Value(),
                         Value queries = Value());

/// A packed [T, H, X] tensor as [1, T, H, X] (a reshape, no copy).
Value asBatchOfOne(ImplicitLocOpBuilder &b, Value packed);

/// B * Hkv within the grid's y dimension, for a B known only at run time.
void requireGroupsFitGrid(ImplicitLocOpBuilder &b, StringRef opName,
                          Value batch, int64_t kvHeads);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_DECOMPOSE_H
