//===- NodeScore.h - IR for one group-summed LSE node score -----*- C++ -*-===//
//
// Both lse_score and hier_topk lower their scoring to this one builder, so
// the CPU reference has a single definition of section 2 of the contract.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_COMMON_NODESCORE_H
#define PISA_LIB_CONVERSION_COMMON_NODESCORE_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <functional>
#include <utility>

namespace mlir::pisa::detail {

/// What is scored against what: tensors (CPU lowering) or memrefs (inside
/// GPU kernels).
struct ScoreOperands {
  Value queries;  ///< [B, Hq, Nq, d], any float type.
  Value children; ///< [B, Hkv, R, d]: raw keys or packed f32 summaries.
  int64_t groupSize;
  int64_t headDim;
  float scale;
  /// Cooperative scoring (GPU): `lanes` threads split every dot product
  /// over d, starting at `lane`, and `laneSum` combines their partial sums
  /// so that every lane holds the total. lanes = 1 is one thread alone.
  int64_t lanes = 1;
  Value lane = nullptr;
  std::function<Value(ImplicitLocOpBuilder &, Value)> laneSum = nullptr;
};

/// Where: one query of one (batch, KV head). All index values.
struct QuerySite {
  Value batch, kvHead, query, position;
};

/// Where element `feature` of row `row` sits in a buffer whose rows are not
/// [batch, head, row, feature] (keys in a page pool): the one hook of the
/// kernels that read keys (the leaf scorers, the append's leaves).
using RowIndices = std::function<SmallVector<Value>(ImplicitLocOpBuilder &,
                                                    Value row, Value feature)>;

/// The child level of the scored node: its rows are
/// children[..., rowBase + r, :] for r < numChildren; node n owns
/// r = n*fanout .. n*fanout + fanout - 1, and child r starts at key
/// r * keysPerChild. All index values. `rowAt`, when set, gives the
/// indices of element e of child row r instead of [batch, kvHead, r, e]
/// (raw keys in a page pool).
struct ChildLevel {
  Value rowBase, numChildren, fanout, keysPerChild;
  RowIndices rowAt = nullptr;
  /// The indices of element `feature` of child row `row` of `site`.
  SmallVector<Value> at(ImplicitLocOpBuilder &b, const QuerySite &site,
                        Value row, Value feature) const {
    if (rowAt)
      return rowAt(b, row, feature);
    return {site.batch, site.kvHead, row, feature};
  }
};

/// The node's first child and how many of its children are valid (exist
/// and start at or before the query position): children first .. first +
/// count - 1, as index values.
std::pair<Value, Value> validChildren(ImplicitLocOpBuilder &b,
                                      const QuerySite &site,
                                      const ChildLevel &level, Value node);

/// A score as the selection orders it: NaN (from inputs whose products
/// overflow, or non-finite inputs) ranks as -inf, so that the order is
/// total and no more than K candidates are ever kept (semantics section 3).
Value rankableScore(ImplicitLocOpBuilder &b, Value score);

/// How many of candidates 0..count-1 outrank candidate `a`: a higher score,
/// or an equal score at a lower position (the tie rule, lower index wins,
/// since candidates are kept in ascending node order), scores compared as
/// rankableScore. `scoreAt` reads a candidate's score.
Value buildRank(
    ImplicitLocOpBuilder &b, Value count, Value a,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> scoreAt);

/// Whether candidate `a` is kept among the `slots` best: when `ranked`
/// (there are more candidates than slots) its rank must be below `slots`;
/// otherwise every candidate is kept, unscored. An i1.
Value buildKeep(
    ImplicitLocOpBuilder &b, Value count, Value a, Value slots, Value ranked,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> scoreAt);

/// One step of an online LogSumExp: folds logit `x` into (running max,
/// rescaled sum) and returns the new pair. Starts from (-inf, 0).
SmallVector<Value> onlineLseUpdate(ImplicitLocOpBuilder &b, Value max,
                                   Value sum, Value x);

/// u(t, node) = sum over the G heads of the group of
/// log sum_{existing child r, first key <= t} exp(scale * q . kbar_r),
/// as f32; -inf when no child is valid.
Value buildGroupScore(ImplicitLocOpBuilder &b, const ScoreOperands &operands,
                      const QuerySite &site, const ChildLevel &level,
                      Value node);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_COMMON_NODESCORE_H
