//===- WarpWalkMMA.h - The two-stage walk on one warp -----------*- C++ -*-===//
//
// With bf16 queries, G = 16 and fanout 2 the walk keeps its state in
// registers, one candidate per lane, and a level that must be ranked is a
// dense product: the query's 16 head rows (an m16 tile) against the child
// summaries of every candidate (two columns per candidate), then per
// candidate the LSE over its two children per head and the sum over heads.
// The candidate set is data-dependent, so the product is built by hand on
// nvgpu.mma.sync rather than from a structured op.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_SELECTION_WARPWALKMMA_H
#define PISA_LIB_CONVERSION_PISATOGPU_SELECTION_WARPWALKMMA_H

#include "Kernels/KernelBuilder.h"

#include "../Common/NodeScore.h"

#include "../Common/LevelLayout.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::pisa::detail {

/// Whether a walk level can be scored on tensor cores
/// (pisa/Analysis/TensorCoreWalk.h).
bool canWalkWithMma(Type queryType, int64_t groupSize, int64_t headDim,
                    int64_t fanout, int64_t candidates);

/// The query's A fragments, one vector<4x2xbf16> per 16-wide k-step,
/// loaded once per query and kept in registers.
struct MmaWalkQuery {
  SmallVector<Value> fragments;
  Value lane;
};
MmaWalkQuery loadMmaWalkQuery(ImplicitLocOpBuilder &b, Value queries,
                              const QuerySite &site, int64_t headDim,
                              Value lane);

/// The pyramid as the walk's B operand: per node row of d f32 summaries, 2d
/// bf16 in which k-step s (16 elements) of lane group t (lane % 4) is 8
/// consecutive values at 32 s + 8 t: the high halves of elements
/// 16 s + 2 t + {0, 1, 8, 9} (what mma.sync's B fragment holds), then their
/// low halves (x - high, rounded). One 16-byte load gives a lane both
/// fragments of a k-step. [B, Hkv, rows, 2 d].
MemRefType fragmentPlanesType(MemRefType pyramid);
/// The kernel that writes them: parameters "pyramid" and "planes", one
/// thread per 16-byte group, grid x = fragmentPlanesBlocks, y = B * Hkv,
/// 256 threads.
Kernel buildFragmentPlanesKernel(PatternRewriter &rewriter, Operation *anchor,
                                 MemRefType pyramid);
/// Its grid x for the pyramid buffer `pyramid` (host side).
Value fragmentPlanesBlocks(ImplicitLocOpBuilder &b, Value pyramid);
constexpr int64_t kFragmentPlanesThreads = 256;

/// The two-stage walk of one query on one warp, levels L..2, with state in
/// registers: lane a holds candidate a (candidates ascending, so the causal
/// ones are a prefix found by ballot); a level that must be ranked is scored
/// on tensor cores (the query's 16 heads against the candidates' children:
/// f32 summaries split into bf16 high and low halves, two products
/// accumulated in f32, about 16 bits beyond bf16); each lane ranks its
/// candidate with shuffles (the tie rule of buildRank: lower index wins);
/// the kept set is a ballot and the next candidates its children. Then the
/// leaves are filtered (causal, not forced) and `writeContender(pos, leaf)`
/// runs on the lane holding each contender; returns their count (uniform).
Value buildMmaWarpWalk(
    ImplicitLocOpBuilder &b, const MmaWalkQuery &query, Value planes,
    const QuerySite &site, const LevelLayout &layout, int64_t topK, Value bt,
    int64_t headDim, float scale,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value pos, Value leaf)>
        writeContender);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_SELECTION_WARPWALKMMA_H
