//===- VectorToMMA.h - Warp tile contractions to mma.sync -------*- C++ -*-===//

#ifndef PISA_CONVERSION_VECTORTOMMA_VECTORTOMMA_H
#define PISA_CONVERSION_VECTORTOMMA_VECTORTOMMA_H

#include "mlir/Support/LLVM.h"

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

/// nvgpu.mma.sync on bf16 -> nvvm.mma.sync (convert-nvgpu-to-nvvm cannot
/// deduce PTX types for bf16 operands).
void populateBF16MmaSyncToNVVMPatterns(RewritePatternSet &patterns);

} // namespace pisa
} // namespace mlir

#endif // PISA_CONVERSION_VECTORTOMMA_VECTORTOMMA_H
