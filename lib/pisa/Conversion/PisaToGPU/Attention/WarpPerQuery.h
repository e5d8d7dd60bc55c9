//===- WarpPerQuery.h - A warp per query over its own blocks ----*- C++ -*-===//
//
// The register attention kernel (AttentionInRegisters.cpp) and the register
// dq kernel (QueryGradInRegisters.cpp) give each query a warp: a block of
// four warps per four consecutive queries of a batch x KV head, warp w
// taking query w from its first attended block to its last, with its list
// of attended blocks in its own slot of shared memory and no block barrier.
// The four queries run side by side, so the loads of the blocks they share
// (the forced first and last two) meet in L1. What both kernels do around
// their products is here: the warp's query (its keys and its list), and per
// list entry the block's first key and visible keys, one operand's rows of
// the block copied into the warp's tile by cp.async (through L1) while the
// other operand's rows are read from global memory straight into mma B
// fragments (buildKeyTileProducts, LeafScoreMMA.h).
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_WARPPERQUERY_H
#define PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_WARPPERQUERY_H

#include "Attention/AttentionSteps.h"
#include "Attention/SparseAttention.h"
#include "Kernels/KernelBuilder.h"
#include "Selection/LeafScoreMMA.h"

#include "../Common/NodeScore.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::pisa::detail {

class WarpPerQuery : protected ThreadPlace {
protected:
  /// `e`'s queries ([B, Hq, Nq, d]) give the element type; blocks of
  /// `blockSize` keys, selection rows of `topK` entries.
  WarpPerQuery(ImplicitLocOpBuilder &b, const Kernel &e, int64_t kvHeads,
               int64_t blockSize, int64_t topK);

  /// The kernel's body: `body(b, q, batchRules)` for warp w's query q =
  /// blockIdx.x `queriesPerBlock` + w where q < Nq (batchRules:
  /// packedBatchRules, computed once for the block), then the return.
  void forEachQuery(
      ImplicitLocOpBuilder &b, int64_t queriesPerBlock,
      llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> body);

  /// Query `q`'s keys (`query`, `keys`, `numKeys`, `keyEnd`, `site`) and
  /// its attended blocks in order, written to `list` (workgroup i32 [K]) by
  /// the warp's lanes; returns their count (every lane). The list is
  /// visible to the warp after a syncWarp.
  Value beginQuery(ImplicitLocOpBuilder &b, Value q, Value batchRules,
                   Value list);

  /// List entry j's block: its first key, the copy of `source`'s rows of
  /// it ([B, Hkv, N, width]) into `tile` ([C x (width + 8)]; started after
  /// a syncWarp, so that the lanes' reads of the tile's previous block are
  /// done; rows past the keys zero-filled: a zero probability times a stale
  /// NaN would be NaN) and its group token, and the keys of it the query
  /// sees (at least one: an attended block starts before keyEnd).
  struct Entry {
    Value firstKey, copied, visible;
  };
  Entry beginEntry(ImplicitLocOpBuilder &b, Value list, Value j, Value source,
                   Value tile, int64_t width) const;

  /// The loop over the list's `count` entries carrying `init`: entry j
  /// returns `body(b, j, state)`. Where `ahead` > 0, entry j first asks the
  /// L2 (cp.async.bulk.prefetch.L2, a lane a row) for entry j + ahead's
  /// rows of the keys and values ([B, Hkv, N, width]: `keyWidth` and
  /// `valueWidth` elements a row), those below N: the rows a later
  /// beginEntry and gatherProducts read. Nothing to wait for; the list
  /// must be visible to the warp.
  SmallVector<Value>
  forEachEntry(ImplicitLocOpBuilder &b, Value list, Value count,
               ValueRange init, int64_t ahead, int64_t keyWidth,
               int64_t valueWidth,
               llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder &,
                                                     Value, ValueRange)>
                   body) const;

  /// A B^T with the A fragments `a` and B the entry's rows of `source`
  /// ([B, Hkv, N, width]) read from global memory: one m16n8 accumulator
  /// per 8 keys, keys past the visible ones reading the last visible row.
  SmallVector<Value> gatherProducts(ImplicitLocOpBuilder &b,
                                    const LeafMmaQuery &a, Value source,
                                    const Entry &entry, int64_t width) const;

  static void syncWarp(ImplicitLocOpBuilder &b);

private:
  /// The query's attended blocks written to `list` in order by the warp
  /// (walkAttendedBlocksByWarp); returns the count (every lane).
  Value listBlocks(ImplicitLocOpBuilder &b, Value list) const;

  /// Asks the L2 for list entry j's rows of each of `sources` (`rowBytes`
  /// a row) where j < `count`, rows below N only.
  void prefetchEntryL2(ImplicitLocOpBuilder &b, Value list, Value j,
                       Value count, ArrayRef<const L2Prefetch *> sources,
                       ArrayRef<int64_t> rowBytes) const;

protected:
  const Kernel &e;
  int64_t blockSize, topK;
  SharedTiles tiles;
  Type elem;
  QuerySite site;
  QueryKeys keys;
  Value query, numKeys, keyEnd;
};

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_WARPPERQUERY_H
