//===- KeyGradBlock.h - The backward's key kernel ---------------*- C++ -*-===//
//
// pisa.kernel.sparse_attention_grad_keys' block kernel (one block per key
// block, segment of its queries and batch x KV head), declared here so that
// its pieces live in two files: AttentionGradKeys.cpp (the block's setup,
// a packed batch's block, the ordered add of the segments' sums and the
// pattern) and KeyGradSteps.cpp (the walk over the segment's queries and
// the staged and register steps over them).
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_KEYGRADBLOCK_H
#define PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_KEYGRADBLOCK_H

#include "Attention/AttentionGrad.h"
#include "Attention/AttentionSteps.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/WarpMma.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <utility>

namespace mlir::pisa::detail {

/// The key kernel's body: block x = (key block, segment), y = batch x KV
/// head.
class KeyGradBlock {
public:
  /// A step over n queries of the list from `first`, carrying `state`.
  using StepFn = llvm::function_ref<SmallVector<Value>(
      ImplicitLocOpBuilder &, Value first, Value n, ValueRange state)>;
  /// `steps` steps over the list from its front, rows.tokens queries each
  /// but the last (`last`), carrying `state`.
  using BatchFn = llvm::function_ref<SmallVector<Value>(
      ImplicitLocOpBuilder &, Value steps, Value last, ValueRange state)>;

  KeyGradBlock(ImplicitLocOpBuilder &b, const Kernel &e,
               const KeyGradPlan &plan, int64_t G, int64_t kvHeads,
               float scale);

  void build(ImplicitLocOpBuilder &b);

private:
  /// The end of the keys query `query` sees: min(N, its position + 1).
  Value keyEndOf(ImplicitLocOpBuilder &b, Value query) const {
    Value position = arith::AddIOp::create(b, queryShift, query);
    return arith::MinUIOp::create(
        b, numKeys, arith::AddIOp::create(b, position, indexConst(b, 1)));
  }

  /// Key `key` of the block's sequence as a row of the keys.
  Value keyRow(ImplicitLocOpBuilder &b, Value key) const {
    return keyBase ? arith::AddIOp::create(b, keyBase, key).getResult() : key;
  }

  /// A packed batch: block x's key block is a block slot of the batch
  /// (sequence s's blocks from floor(cu_k[s] / C) + s, as the count kernel
  /// numbers them). Finds its sequence (a binary search of the first
  /// slots), its keys and queries, and whether the slot is one of its
  /// blocks in a batch that keeps the rules.
  void locatePackedBlock(ImplicitLocOpBuilder &b);

  /// A packed batch whose cu_seqlens break the rules: block x's first
  /// segment writes NaN to dk and dv rows [x C, x C + C) (the slots cover
  /// the Tk rows), so that no row of such a call holds a plausible value.
  void writeBrokenRows(ImplicitLocOpBuilder &b);

  /// Zeroes `elems` f32 of a tile (a multiple of 4), 16 bytes a thread.
  void zeroTile(ImplicitLocOpBuilder &b, Value tile, int64_t elems);

  /// Runs `batch` over the segment's queries (its run of the block's list,
  /// in order), carrying `init`. They are read kListWindow at a time and
  /// appended to the list in shared memory after those left from the last
  /// window; once it holds p.stepsAhead steps' queries the full steps run
  /// as one batch and what is left moves to the list's front; the last
  /// batch takes what is left after the last window.
  SmallVector<Value> forEachBatch(ImplicitLocOpBuilder &b, ValueRange init,
                                  BatchFn batch);
  /// The queries of step s of a batch of `steps` (BatchFn's meaning).
  Value stepQueries(ImplicitLocOpBuilder &b, Value s, Value steps,
                    Value last) const;
  /// forEachBatch stepping through each batch one step at a time.
  SmallVector<Value> forEachStep(ImplicitLocOpBuilder &b, ValueRange init,
                                 StepFn step);

  /// Appends the segment's list entries [w0, min(w0 + kListWindow, end))
  /// to the list after its first `pending` (a thread each) and writes the
  /// list's new length.
  void appendWindow(ImplicitLocOpBuilder &b, Value w0, Value pending);

  /// Slot s of a step from list entry `first`: its query (query 0, in
  /// bounds, for a slot past n) and whether it holds one. With p.scores a
  /// list entry is query K + the block's rank among the query's attended
  /// blocks (list_attending_queries); slotRank is that rank.
  Value holds(ImplicitLocOpBuilder &b, Value slot, Value n) {
    return cmp(b, arith::CmpIPredicate::ult, slot, n);
  }
  Value slotQuery(ImplicitLocOpBuilder &b, Value first, Value slot, Value n);
  Value slotRank(ImplicitLocOpBuilder &b, Value first, Value slot);
  Value slotEntry(ImplicitLocOpBuilder &b, Value first, Value slot);
  /// K, the selection's entries a row (the query lists' last extent).
  int64_t topK() const {
    return cast<MemRefType>(e.arg("queryList").getType()).getShape()[3];
  }

  /// The step's head rows of q and dO into their tiles.
  void stageStepRows(ImplicitLocOpBuilder &b, Value first, Value n);

  /// The staged step over n queries from list entry `first`: stage their
  /// head rows, S and dP, P and dS transposed, dV += P^T dO and dK += dS^T
  /// Q, all through shared memory.
  void stagedStep(ImplicitLocOpBuilder &b, const RowSite &site, Value first,
                  Value n);

  /// Row `row` of a [rows x C] f32 fragment (this thread's columns from
  /// col0) as column `row` of `tile` ([C x rows], 16-bit).
  void storeTransposed(ImplicitLocOpBuilder &b, Value values, Value tile,
                       Value col0, Value row);

  // The register key kernel's geometry (KeyGradSteps.cpp): C / 16 key
  // slabs of 16 keys, and the row groups the warps split the step rows in.
  int64_t slabs() const { return p.blockSize / kMmaRows; }
  int64_t rowGroups() const { return kGradWarps / slabs(); }

  SmallVector<Value> zeroSums(ImplicitLocOpBuilder &b);

  /// One of the register kernel's two step buffers: Q and dO head rows,
  /// each row's lse and D (f32, 0 for rows without a query or head) and
  /// the number of the block's keys its query sees (0 for those rows).
  struct StepTiles {
    Value query, gradOut, lse, delta, visible;
    /// With p.scores: each row's query and first column in `scores`.
    Value scoreQuery, scoreColumn;
  };
  /// Buffer `parity` (0 or 1, computed in the kernel).
  StepTiles stepTiles(ImplicitLocOpBuilder &b, Value parity) const;

  /// Issues the cp.async copies of the step over n queries from list
  /// entry `first` into buffer `parity` (kStepCopyGroups groups: Q, dO,
  /// lse and D) and stores its rows' visible keys there.
  void issueStep(ImplicitLocOpBuilder &b, Value first, Value n, Value parity);
  static constexpr int64_t kStepCopyGroups = 3;
  /// Asks the L2 for the Q and dO rows of the step over n queries from
  /// list entry `first` (prefetchHeadRowsL2): half the threads each.
  void prefetchStep(ImplicitLocOpBuilder &b, Value first, Value n);

  /// The register kernel's batch: each step's copies are issued before the
  /// step before it computes; `sums` and the result are dK's n8 tiles,
  /// then dV's.
  SmallVector<Value> registerBatch(ImplicitLocOpBuilder &b, Value steps,
                                   Value last, ValueRange sums);

  /// One chunk of 16 step rows from `row0` of `step` against the warp's
  /// keys from `key0`, accumulated into `sums`.
  void chunk(ImplicitLocOpBuilder &b, const StepTiles &step, Value key0,
             Value row0, SmallVector<Value> &sums);

  /// P^T and dS^T of the warp's keys from `key0` against the step rows of
  /// the n8 tiles `s` (S^T) and `dp` (dP^T), tile t holding rows row0 + 8 t
  /// + 2 (lane % 4) + {0, 1}: per tile its four values [half * 2 + j]. No
  /// dS^T where `dp` is empty (gradients computes it later).
  std::pair<SmallVector<SmallVector<Value>>, SmallVector<SmallVector<Value>>>
  probabilities(ImplicitLocOpBuilder &b, const StepTiles &step, Value key0,
                Value row0, ArrayRef<Value> s, ArrayRef<Value> dp);
  /// dS^T from P^T (probabilities') and the n8 tiles of dP^T.
  SmallVector<SmallVector<Value>> gradients(ImplicitLocOpBuilder &b,
                                            const StepTiles &step, Value row0,
                                            ArrayRef<SmallVector<Value>> probs,
                                            ArrayRef<Value> dp);
  /// The first of the two step rows lane (g, tig) holds in n8 tile t of
  /// a product over the rows from `row0`: row0 + 8 t + 2 tig.
  static Value tileRow(ImplicitLocOpBuilder &b, Value row0, Value tig,
                       int64_t t);
  /// dS = P (dP - D) of one value, D element j of the row pair `delta`.
  static Value gradient(ImplicitLocOpBuilder &b, Value prob, Value dp,
                        Value delta, int64_t j);

  /// The whole step on the warpgroup (p.warpgroup): S^T = K Q^T and dP^T =
  /// V dO^T as m64 x 64 products of the swizzled tiles (warp w's part: keys
  /// 16 w .., the mma.sync accumulator layout), P^T and dS^T in the
  /// accumulators, then dK += dS^T Q and dV += P^T dO with P^T and dS^T as
  /// wgmma's register A and Q, dO read MN-major from the same tiles.
  void warpgroupStep(ImplicitLocOpBuilder &b, const StepTiles &step,
                     Value parity, SmallVector<Value> &sums);

  /// With p.scores: the n8 tiles `grads` (dS^T of the warp's keys from
  /// `key0` against the step rows from `row0`, as probabilities' layout)
  /// rounded to the element type into `scores` at each row's query and
  /// column, keys in order: the G x C tile a query's list of attended
  /// blocks holds at its rank there.
  void storeScores(ImplicitLocOpBuilder &b, const StepTiles &step, Value key0,
                   Value row0, ArrayRef<SmallVector<Value>> grads);

  /// The lanes' sums into the dk and dv tiles, the row groups in order.
  void storeSums(ImplicitLocOpBuilder &b, ArrayRef<Value> sums);

  /// The segments of a key block add their sums in rank order, so that the
  /// result does not depend on when each runs: rank r waits until the
  /// block's counter (the last word of its index row) reads r, adds its tiles
  /// to the f32 sums of the ranks before it (`accumulators`), and counts
  /// itself done; the last one writes dk = scale sum and dv.
  void addInOrder(ImplicitLocOpBuilder &b);

  /// Spins until the counter at `at` reads this segment's rank (an atomic
  /// read: a plain load could be hoisted out of the loop), then orders the
  /// reads after it.
  void waitFor(ImplicitLocOpBuilder &b, Value index, ArrayRef<Value> at);

  /// sum = tile (+ the accumulated sum unless this is the first rank) for
  /// the block's keys before N, 4 values a thread at a time; the last
  /// rank writes factor * sum to `out`, the others to the accumulators
  /// at columns [column0, column0 + width).
  void addTile(ImplicitLocOpBuilder &b, Value tile, int64_t width,
               int64_t column0, Value first, Value out, float factor,
               Value accumulators);

  const Kernel &e;
  const KeyGradPlan &p;
  int64_t G;
  float scale;
  Type elem;
  std::optional<SharedTiles> shared;
  Value kTile, vTile, qTile, doTile, sTile, dpTile, pT, dsT, dkTile, dvTile,
      list, listCount;
  /// The K and V tiles' wgmma descriptors (p.warpgroup).
  Value keyDesc, valueDesc;
  Value block, rank, segment, takesPart, lastSegment, batch, kv, tid, warp,
      lane, firstHead, numKeys, firstKey;
  /// The block's list from listStart (an entry of the query lists, flat)
  /// and this segment's run of it, [segmentBegin, segmentEnd) from there.
  Value listStart, segmentBegin, segmentEnd;
  /// The rank in the chain of the block's segments that take part.
  Value chainRank;
  /// Position of query row r: r + queryShift.
  Value queryShift;
  /// A packed batch's block (null for a batch): its sequence's first key
  /// row, whether the slot is one of its blocks, and whether the batch
  /// breaks the rules.
  Value keyBase, realBlock, brokenBatch;
};

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_KEYGRADBLOCK_H
