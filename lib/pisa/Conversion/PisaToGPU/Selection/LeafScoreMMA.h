//===- LeafScoreMMA.h - Leaf and level group scores on tensor cores -*- C++
//-*-===//
//
// The single-stage kernels score a contender leaf from its C raw keys:
// u = sum over the G heads of log sum_j exp(scale q_h . k_j). On one warp
// that is a (G x d) x (d x C) product: the query's heads are an m16 tile
// (G <= 16), the leaf's keys n8 tiles, mma.sync m16n8k16 with f32
// accumulation (16-bit products are exact in f32), then per head the LSE
// over the accumulator's columns and the sum over heads, as the tensor-core
// walk does for its levels (WarpWalkMMA.h).
//
// The product runs over d in a permuted order, the same for both operands
// (a dot product does not depend on it), so that a lane loads 16 bytes of a
// key row at once: k-steps 2s and 2s + 1 of lane group i (lane % 4) are
// elements 32 s + 8 i + [0, 4) and [4, 8), which mma.sync reads as its
// k = 2i, 2i + 1, 2i + 8, 2i + 9.
//
// A query's block of warps (decode) scores its walk's levels with the same
// query fragments: a candidate's g = 2 child summaries are two columns, each
// f32 row split into bf16 high and low halves in registers (about the
// two-stage walk's precision, WarpWalkMMA.h, without its fragment planes,
// which a cache updated in place would have to keep too).
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_SELECTION_LEAFSCOREMMA_H
#define PISA_LIB_CONVERSION_PISATOGPU_SELECTION_LEAFSCOREMMA_H

#include "../Common/NodeScore.h"
#include "Kernels/RowSoftmax.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::pisa::detail {

/// Whether a warp can score leaves on tensor cores: f16 or bf16 queries and
/// keys, G <= 16 (one m16 tile), d a multiple of 32 (16-byte loads over two
/// k-steps) and C a multiple of 8 (n8 tiles).
bool canScoreLeavesWithMma(Type elem, int64_t groupSize, int64_t headDim,
                           int64_t blockSize);

/// Whether a query's block can also score its walk's levels on tensor
/// cores: the leaves' conditions with bf16 queries (f16 low halves would
/// fall below f16's range) and fanout 2 (a candidate's two children land in
/// one lane's accumulator pair).
bool canScoreLevelsWithMma(Type elem, int64_t groupSize, int64_t headDim,
                           int64_t blockSize, int64_t fanout);

/// The query's A fragments in the permuted order, one per k-step; head rows
/// past G are zeros.
struct LeafMmaQuery {
  SmallVector<Value> fragments;
  Value lane;
  int64_t groupSize;
};
LeafMmaQuery loadLeafMmaQuery(ImplicitLocOpBuilder &b, Value queries,
                              const QuerySite &site, int64_t groupSize,
                              int64_t headDim, Value lane);

/// S = Q K^T for the `blockSize` key rows from `rowBase` of `keyLevel`
/// (rows at or past `count` > 0 load row count - 1; mask their columns):
/// one m16n8 accumulator per 8 keys, lane (g, i) holding heads g and g + 8
/// against keys 8 t + 2 i and 8 t + 2 i + 1 of tile t.
SmallVector<Value> buildKeyTileProducts(ImplicitLocOpBuilder &b,
                                        const LeafMmaQuery &query, Value keys,
                                        const QuerySite &site,
                                        const ChildLevel &keyLevel,
                                        Value rowBase, Value count,
                                        int64_t blockSize, int64_t headDim);

/// Row half `half` (head g, or g + 8 for 1) of buildKeyTileProducts'
/// accumulators as logits in base 2 (scale times log2 e folded into one
/// multiply), the keys at or past `count` -inf: the lane's 2 per tile.
SmallVector<Value> rowLogits(ImplicitLocOpBuilder &b, ArrayRef<Value> acc,
                             int64_t half, Value lane, Value count,
                             float scale);

/// The lanes of a quad (the four that share an mma accumulator row).
constexpr int64_t kQuadLanes[] = {1, 2};

/// The max of a row's logits over the lane's columns and then its quad.
inline Value quadRowMax(ImplicitLocOpBuilder &b, ArrayRef<Value> logits) {
  return rowMax(b, logits, kQuadLanes);
}

/// The LSE in base 2 of `scale` times a row's products (finite, no column
/// masked) over the lane's columns and then its quad (scaledRowLse2).
inline Value quadScaledRowLse(ImplicitLocOpBuilder &b, ArrayRef<Value> products,
                              Value scale) {
  return scaledRowLse2(b, products, scale, kQuadLanes);
}

/// Child c of candidate a (node `node`) of a fanout-2 level scored on
/// tensor cores, its children at `level`: its row within the level (row 0
/// when it does not count, so that loads stay in bounds) and whether it
/// counts (a < numCausal, the child exists and starts at or before the
/// query).
std::pair<Value, Value> pairChild(ImplicitLocOpBuilder &b,
                                  const QuerySite &site,
                                  const ChildLevel &level, Value numCausal,
                                  Value a, Value node, Value c);

/// The group score of the candidate whose two children are this lane's
/// columns of the m16n8 accumulator `acc` (`valid`: whether each child
/// counts): per head row the LSE over them in base 2 (scale times log2 e
/// folded in; -inf when neither counts), then sumHeadRows.
Value childPairGroupScore(ImplicitLocOpBuilder &b, Value acc,
                          ArrayRef<Value> valid, Value lane, int64_t groupSize,
                          float scale);

/// A group score from this lane's two head rows' LSEs in base 2 (`lse2`:
/// heads lane / 4 and lane / 4 + 8; heads at or past `groupSize` left out):
/// their sum over the lanes that share lane % 4, back in base e.
Value sumHeadRows(ImplicitLocOpBuilder &b, ArrayRef<Value> lse2, Value lane,
                  int64_t groupSize);

/// The group score of contender `leaf` from its C raw keys (rows of
/// `keyLevel`): a contender is at most b_t - 2, so all its keys exist and
/// are visible to the query (docs/semantics.md, section 3) and none is
/// masked. The same on every lane.
Value buildLeafScoreMma(ImplicitLocOpBuilder &b, const LeafMmaQuery &query,
                        Value keys, const QuerySite &site,
                        const ChildLevel &keyLevel, Value leaf,
                        int64_t blockSize, int64_t headDim, float scale);

/// The group scores of a level's candidates 4 `tile` .. 4 `tile` + 3 (node
/// of candidate a: `nodeOf(a)`, a shuffle every lane runs), whose fanout-2
/// children are rows of the f32 `summaries` at `level`: the query's heads
/// against the 8 child rows (each split into bf16 high and low halves, x
/// to 2^-15 of itself, both products accumulated in f32), per candidate
/// and head the LSE over its valid children, then the sum over the G
/// heads. Lane i (lane % 4) returns candidate 4 `tile` + i's; candidates
/// at or past `numCausal` score -inf.
Value buildLevelScoreMma(
    ImplicitLocOpBuilder &b, const LeafMmaQuery &query, Value summaries,
    const QuerySite &site, const ChildLevel &level, Value tile, Value numCausal,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> nodeOf,
    int64_t headDim, float scale);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_SELECTION_LEAFSCOREMMA_H
