//===- VectorToMMA.h - Warp tile contractions to mma.sync -------*- C++ -*-===//

#ifndef PISA_CONVERSION_VECTORTOMMA_VECTORTOMMA_H
#define PISA_CONVERSION_VECTORTOMMA_VECTORTOMMA_H

#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"

#include "llvm/ADT/DenseMap.h"

namespace mlir {
class Operation;
class RewritePatternSet;
class RewriterBase;

namespace pisa {

/// Unrolls every warp-level tile product under `root` (vector.contract
/// (m, k) x (n, k) -> (m, n) on 16-bit floats into f32), the transfer_reads
/// feeding it and the transfer_writes of its result to the m16n8k16 shape
/// of mma.sync.
LogicalResult unrollWarpMatmulsToMmaShape(Operation *root);

/// Converts the unrolled tile products under `root` (shared-memory
/// transfer_read -> vector.contract -> transfer_write, f16 or bf16) to
/// nvgpu.ldmatrix and nvgpu.mma.sync, one ldmatrix per operand tile.
LogicalResult convertWarpMatmulsToNVGPU(RewriterBase &rewriter,
                                        Operation *root);

/// Marks, through `mark`, the ops of the register epilogue that consumes a
/// warp tile product (see AccumulatorEpilogue.cpp for what it may contain)
/// with the shapes they unroll to: 16 x 8 tiles and 16-row pieces.
void markAccumulatorEpilogue(
    Value product,
    llvm::function_ref<void(Operation *, ArrayRef<int64_t>)> mark);
/// Rewrites the unrolled epilogue ops under `root` onto the mma.sync
/// accumulator layout; `tiles` maps each unrolled product (16 x 8) to its
/// accumulator fragment (vector<2x2xf32>) and gains the epilogue's tiles.
LogicalResult distributeAccumulatorEpilogue(RewriterBase &rewriter,
                                            Operation *root,
                                            DenseMap<Value, Value> &tiles);
/// nvgpu.mma.sync on bf16 -> nvvm.mma.sync (convert-nvgpu-to-nvvm cannot
/// deduce PTX types for bf16 operands).
void populateBF16MmaSyncToNVVMPatterns(RewritePatternSet &patterns);

} // namespace pisa
} // namespace mlir

#endif // PISA_CONVERSION_VECTORTOMMA_VECTORTOMMA_H
