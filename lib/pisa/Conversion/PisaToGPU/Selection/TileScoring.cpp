//===- TileScoring.cpp - Stage 2 of the two-stage schedule ----------------===//
//
// A pair needs scoring when its query has more contenders than free slots.
// histogram: leafCount[leaf] += 1 per such pair (atomics).
// scan: one warp per (batch, KV head) turns counts into group starts and
//   each leaf's first tile (a group is cut into ceil(count / Q_tile) tiles).
// scatter: each pair takes the next position of its leaf's group (atomics);
//   order inside a group does not matter, every pair is scored alike. The
//   pair that lands at the start of a tile records the tile (tileLeaf,
//   tileFirst), so tiles are written in parallel, not by the scan's warp.
// score: one block per tile; threads are (query of the tile, head). The
//   block loads the leaf's keys, Ct rows at a time, into shared memory as
//   f32; every thread runs an online LSE over the keys its query may see;
//   heads are summed through shared memory.
//
//===----------------------------------------------------------------------===//

#include "Selection/TileScoring.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/RowSoftmax.h"
#include "Selection/DeviceSelection.h"
#include "Selection/PackedSequences.h"

#include "../Common/LoopBuilders.h"
#include "../Common/NodeScore.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::pisa::detail;

static constexpr int64_t kPairThreads = kBucketThreads;
static constexpr int64_t kScanLanes = 32;
static constexpr int64_t kMaxTileRows = 64;

static Value load(ImplicitLocOpBuilder &b, Value mem, ValueRange idx) {
  return memref::LoadOp::create(b, mem, idx);
}

/// A (query, contender) pair of the per-pair kernels.
struct ScoredPair {
  Value batch, kv, query, slot, leaf;
};

/// The per-pair kernels' common part: thread p takes pair p (query p / g*K,
/// slot p % g*K) and runs `body` when that pair needs scoring, i.e. its
/// query has more contenders than free slots. Reads the kernel's offset,
/// contenders and counts.
static void forEachScoredPair(
    ImplicitLocOpBuilder &b, const Kernel &kernel, const TileProblem &p,
    Value numLeaves,
    llvm::function_ref<void(ImplicitLocOpBuilder &, const ScoredPair &)> body) {
  Value offset = kernel.arg("offset"), contenders = kernel.arg("contenders");
  Value counts = kernel.arg("counts");
  Value numQueries = dimOf(b, counts, 2);
  Value pair = arith::AddIOp::create(
      b, arith::MulIOp::create(b, blockIdX(b), indexConst(b, kPairThreads)),
      threadIdX(b));
  Value heads = indexConst(b, p.kvHeads);
  Value batch = arith::DivUIOp::create(b, blockIdY(b), heads);
  Value kv = arith::RemUIOp::create(b, blockIdY(b), heads);
  Value gk = indexConst(b, p.candidates);
  Value inRange = cmp(b, arith::CmpIPredicate::ult, pair,
                      arith::MulIOp::create(b, numQueries, gk));
  // Clamp so that the loads below stay in bounds for idle threads (the
  // grid has a thread for at least one pair, so Nq >= 1).
  Value i = arith::MinUIOp::create(
      b, arith::DivUIOp::create(b, pair, gk),
      arith::SubIOp::create(b, numQueries, indexConst(b, 1)));
  Value slot = arith::RemUIOp::create(b, pair, gk);
  Value n = toIndex(b, load(b, counts, {batch, kv, i}));
  Value bt, firstLeaf;
  if (p.packed()) {
    // The walk wrote no contender for the rows of a batch that breaks a
    // rule, so no pair of them is scored; this kernel reads no key, and
    // cu_k[B] stands for Tk.
    Value cuK = kernel.arg("cuSeqlensK");
    Value lastKey = cuEntry(
        b, cuK, arith::SubIOp::create(b, dimOf(b, cuK, 0), indexConst(b, 1)));
    QueryRowSequence seq = sequenceOfQueryRow(b, kernel.arg("cuSeqlensQ"), cuK,
                                              numQueries, lastKey, i);
    Value leaves = arith::CeilDivUIOp::create(b, seq.keys.count,
                                              indexConst(b, p.blockSize));
    bt = leafOfPosition(b, p.blockSize, leaves, seq.position);
    firstLeaf = firstNodeSlot(b, seq.keys.first, seq.seq, p.blockSize,
                              indexConst(b, 1));
  } else {
    bt = leafOfPosition(b, p.blockSize, numLeaves,
                        arith::AddIOp::create(b, offset, i));
  }
  Value slots = contenderSlots(b, p.topK, bt);
  Value needs = arith::AndIOp::create(
      b, inRange,
      arith::AndIOp::create(b, cmp(b, arith::CmpIPredicate::ugt, n, slots),
                            cmp(b, arith::CmpIPredicate::ult, slot, n)));
  buildIfThen(b, needs, [&](ImplicitLocOpBuilder &tb) {
    Value leaf = toIndex(tb, load(tb, contenders, {batch, kv, i, slot}));
    // A packed batch's leaf arrays number leaves over the batch.
    if (firstLeaf)
      leaf = arith::AddIOp::create(tb, leaf, firstLeaf);
    body(tb, ScoredPair{batch, kv, i, slot, leaf});
  });
}

SmallVector<KernelParam>
mlir::pisa::detail::cuSeqlensParams(const TileProblem &p) {
  if (!p.packed())
    return {};
  return {{"cuSeqlensQ", p.cuSeqlensQ}, {"cuSeqlensK", p.cuSeqlensK}};
}

SmallVector<KernelParam>
mlir::pisa::detail::scoreKernelParams(const TileProblem &p) {
  Type index = IndexType::get(p.queries.getContext());
  const SortBuffers &s = p.sort;
  SmallVector<KernelParam> params{{"queries", p.queries},
                                  {"keys", p.keys},
                                  {"offset", index},
                                  {"leafCount", s.leafCount},
                                  {"leafStart", s.leafStart},
                                  {"tileLeaf", s.tileLeaf},
                                  {"tileFirst", s.tileFirst},
                                  {"numTiles", s.numTiles},
                                  {"sortedPairs", s.sortedPairs},
                                  {"scores", p.scores}};
  params.append(cuSeqlensParams(p));
  return params;
}

TileSpan mlir::pisa::detail::loadTileSpan(ImplicitLocOpBuilder &b,
                                          const Kernel &score,
                                          const TileProblem &p, Value batch,
                                          Value kv, Value tile) {
  Value leaf = toIndex(b, load(b, score.arg("tileLeaf"), {batch, kv, tile}));
  Value first = toIndex(b, load(b, score.arg("tileFirst"), {batch, kv, tile}));
  Value end = arith::AddIOp::create(
      b, toIndex(b, load(b, score.arg("leafStart"), {batch, kv, leaf})),
      toIndex(b, load(b, score.arg("leafCount"), {batch, kv, leaf})));
  Value size = arith::MinUIOp::create(b, indexConst(b, p.qTile),
                                      arith::SubIOp::create(b, end, first));
  Value cBlock = indexConst(b, p.blockSize);
  if (!p.packed())
    return {leaf,
            first,
            size,
            arith::MulIOp::create(b, leaf, cBlock),
            indexConst(b, 0),
            dimOf(b, score.arg("keys"), 2),
            score.arg("offset")};
  // The leaf's sequence: the last whose first leaf slot is <= leaf.
  Value cuQ = score.arg("cuSeqlensQ"), cuK = score.arg("cuSeqlensK");
  Value one = indexConst(b, 1);
  Value numSeqs = arith::SubIOp::create(b, dimOf(b, cuK, 0), one);
  auto firstLeaf = [&](ImplicitLocOpBuilder &lb, Value s) {
    return firstNodeSlot(lb, cuEntry(lb, cuK, s), s, p.blockSize,
                         indexConst(lb, 1));
  };
  Value seq = findSequence(b, numSeqs, leaf, firstLeaf);
  Value local = arith::SubIOp::create(b, leaf, firstLeaf(b, seq));
  Value k0 = cuEntry(b, cuK, seq);
  Value n = arith::SubIOp::create(
      b, cuEntry(b, cuK, arith::AddIOp::create(b, seq, one)), k0);
  Value q0 = cuEntry(b, cuQ, seq);
  Value nq = arith::SubIOp::create(
      b, cuEntry(b, cuQ, arith::AddIOp::create(b, seq, one)), q0);
  // t = N_b - Nq_b + (row - cu_q[b]).
  Value queryShift =
      arith::SubIOp::create(b, arith::SubIOp::create(b, n, nq), q0);
  return {leaf, first, size,      arith::MulIOp::create(b, local, cBlock),
          k0,   n,     queryShift};
}

BlockTiles mlir::pisa::detail::loadBlockTiles(ImplicitLocOpBuilder &b,
                                              const Kernel &score,
                                              const TileProblem &p,
                                              int64_t tilesPerBlock) {
  Value heads = indexConst(b, p.kvHeads);
  Value batch = arith::DivUIOp::create(b, blockIdY(b), heads);
  Value kv = arith::RemUIOp::create(b, blockIdY(b), heads);
  Value numTiles = toIndex(b, memref::LoadOp::create(b, score.arg("numTiles"),
                                                     ValueRange{batch, kv}));
  Value first =
      arith::MulIOp::create(b, blockIdX(b), indexConst(b, tilesPerBlock));
  Value end = arith::MinUIOp::create(
      b, arith::AddIOp::create(b, first, indexConst(b, tilesPerBlock)),
      numTiles);
  return {batch, kv, first, end};
}

TileMember mlir::pisa::detail::loadTileMember(ImplicitLocOpBuilder &b,
                                              const Kernel &score,
                                              const TileProblem &p, Value batch,
                                              Value kv, const TileSpan &span,
                                              Value member) {
  Value one = indexConst(b, 1);
  Value sortedPairs = score.arg("sortedPairs");
  Value at = arith::MinUIOp::create(
      b, arith::AddIOp::create(b, span.first, member),
      arith::SubIOp::create(b, dimOf(b, sortedPairs, 2), one));
  Value pair = toIndex(b, load(b, sortedPairs, {batch, kv, at}));
  Value gk = indexConst(b, p.candidates);
  Value query = arith::MinUIOp::create(
      b, arith::DivUIOp::create(b, pair, gk),
      arith::SubIOp::create(b, dimOf(b, score.arg("scores"), 2), one));
  Value t = arith::AddIOp::create(b, span.queryShift, query);
  Value limit =
      arith::MinUIOp::create(b, span.numKeys, arith::AddIOp::create(b, t, one));
  return {query, arith::RemUIOp::create(b, pair, gk), limit};
}

/// Adds 1 to the i32 at `idx` of `mem` (atomically); returns the old value.
static Value atomicAddOne(ImplicitLocOpBuilder &b, Value mem, ValueRange idx) {
  Value one = arith::ConstantIntOp::create(b, 1, 32);
  return memref::AtomicRMWOp::create(
      b, b.getI32Type(),
      arith::AtomicRMWKindAttr::get(b.getContext(), arith::AtomicRMWKind::addi),
      one, mem, idx);
}

/// histogram: each scored pair counts one for its leaf.
static Kernel buildHistogramKernel(PatternRewriter &rewriter, Operation *anchor,
                                   const TileProblem &p) {
  SmallVector<KernelParam> params{{"offset", rewriter.getIndexType()},
                                  {"contenders", p.contenders},
                                  {"counts", p.counts},
                                  {"leafCount", p.sort.leafCount}};
  params.append(cuSeqlensParams(p));
  Kernel e = createKernel(rewriter, anchor, "select_stage2_histogram", params);
  ImplicitLocOpBuilder b(anchor->getLoc(), rewriter);
  forEachScoredPair(b, e, p, dimOf(b, e.arg("leafCount"), 2),
                    [&](ImplicitLocOpBuilder &tb, const ScoredPair &at) {
                      atomicAddOne(tb, e.arg("leafCount"),
                                   {at.batch, at.kv, at.leaf});
                    });
  gpu::ReturnOp::create(b);
  return e;
}

/// scan: one warp per (batch, KV head); each lane owns a contiguous run of
/// leaves, lane totals are scanned with shuffles, then each lane writes
/// its run's pair starts, cursors and first tiles.
static Kernel buildScanKernel(PatternRewriter &rewriter, Operation *anchor,
                              const TileProblem &p) {
  const SortBuffers &s = p.sort;
  Kernel e = createKernel(rewriter, anchor, "select_stage2_scan",
                          {{"leafCount", s.leafCount},
                           {"leafStart", s.leafStart},
                           {"cursor", s.cursor},
                           {"tileBase", s.tileBase},
                           {"numTiles", s.numTiles}});
  ImplicitLocOpBuilder b(anchor->getLoc(), rewriter);
  Value heads = indexConst(b, p.kvHeads);
  Value batch = arith::DivUIOp::create(b, blockIdY(b), heads);
  Value kv = arith::RemUIOp::create(b, blockIdY(b), heads);
  Value lane = threadIdX(b);
  Value zero = indexConst(b, 0), q = indexConst(b, p.qTile);
  Value leaves = dimOf(b, e.arg("leafCount"), 2);
  Value run = arith::CeilDivUIOp::create(b, leaves, indexConst(b, kScanLanes));
  Value begin =
      arith::MinUIOp::create(b, arith::MulIOp::create(b, lane, run), leaves);
  Value end =
      arith::MinUIOp::create(b, arith::AddIOp::create(b, begin, run), leaves);
  auto countOf = [&](ImplicitLocOpBuilder &lb, Value leaf) {
    return toIndex(lb, load(lb, e.arg("leafCount"), {batch, kv, leaf}));
  };
  auto own =
      buildLoop(b, begin, end, {zero, zero},
                [&](ImplicitLocOpBuilder &lb, Value leaf, ValueRange st) {
                  Value count = countOf(lb, leaf);
                  return SmallVector<Value>{
                      arith::AddIOp::create(lb, st[0], count),
                      arith::AddIOp::create(
                          lb, st[1], arith::CeilDivUIOp::create(lb, count, q))};
                });
  // Inclusive scan of (pairs, tiles) over the lanes, as i32.
  Value width = arith::ConstantIntOp::create(b, kScanLanes, 32);
  SmallVector<Value> incl{toI32(b, own[0]), toI32(b, own[1])};
  for (int64_t offset = 1; offset < kScanLanes; offset *= 2) {
    Value off = arith::ConstantIntOp::create(b, offset, 32);
    for (Value &v : incl) {
      auto up = gpu::ShuffleOp::create(b, v, off, width, gpu::ShuffleMode::UP);
      v = arith::SelectOp::create(
          b, up.getValid(), arith::AddIOp::create(b, v, up.getShuffleResult()),
          v);
    }
  }
  Value pairStart = arith::SubIOp::create(b, toIndex(b, incl[0]), own[0]);
  Value tileStart = arith::SubIOp::create(b, toIndex(b, incl[1]), own[1]);
  buildLoop(b, begin, end, {pairStart, tileStart},
            [&](ImplicitLocOpBuilder &lb, Value leaf, ValueRange st) {
              Value count = countOf(lb, leaf);
              Value start = toI32(lb, st[0]);
              memref::StoreOp::create(lb, start, e.arg("leafStart"),
                                      ValueRange{batch, kv, leaf});
              memref::StoreOp::create(lb, start, e.arg("cursor"),
                                      ValueRange{batch, kv, leaf});
              memref::StoreOp::create(lb, toI32(lb, st[1]), e.arg("tileBase"),
                                      ValueRange{batch, kv, leaf});
              Value numTiles = arith::CeilDivUIOp::create(lb, count, q);
              return SmallVector<Value>{
                  arith::AddIOp::create(lb, st[0], count),
                  arith::AddIOp::create(lb, st[1], numTiles)};
            });
  Value last = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane,
                                     indexConst(b, kScanLanes - 1));
  buildIfThen(b, last, [&](ImplicitLocOpBuilder &tb) {
    memref::StoreOp::create(tb, incl[1], e.arg("numTiles"),
                            ValueRange{batch, kv});
  });
  gpu::ReturnOp::create(b);
  return e;
}

/// scatter: each scored pair takes the next slot of its leaf's group; the
/// first pair of a tile records the tile's leaf and first slot.
static Kernel buildScatterKernel(PatternRewriter &rewriter, Operation *anchor,
                                 const TileProblem &p) {
  const SortBuffers &s = p.sort;
  SmallVector<KernelParam> params{{"offset", rewriter.getIndexType()},
                                  {"contenders", p.contenders},
                                  {"counts", p.counts},
                                  {"cursor", s.cursor},
                                  {"sortedPairs", s.sortedPairs},
                                  {"leafStart", s.leafStart},
                                  {"tileBase", s.tileBase},
                                  {"tileLeaf", s.tileLeaf},
                                  {"tileFirst", s.tileFirst}};
  params.append(cuSeqlensParams(p));
  Kernel e = createKernel(rewriter, anchor, "select_stage2_scatter", params);
  ImplicitLocOpBuilder b(anchor->getLoc(), rewriter);
  forEachScoredPair(
      b, e, p, dimOf(b, e.arg("leafStart"), 2),
      [&](ImplicitLocOpBuilder &tb, const ScoredPair &at) {
        Value pos = toIndex(
            tb, atomicAddOne(tb, e.arg("cursor"), {at.batch, at.kv, at.leaf}));
        Value pair = arith::AddIOp::create(
            tb,
            arith::MulIOp::create(tb, at.query, indexConst(tb, p.candidates)),
            at.slot);
        memref::StoreOp::create(tb, toI32(tb, pair), e.arg("sortedPairs"),
                                ValueRange{at.batch, at.kv, pos});
        Value rel = arith::SubIOp::create(
            tb, pos,
            toIndex(tb,
                    load(tb, e.arg("leafStart"), {at.batch, at.kv, at.leaf})));
        Value q = indexConst(tb, p.qTile);
        Value opens =
            cmp(tb, arith::CmpIPredicate::eq,
                arith::RemUIOp::create(tb, rel, q), indexConst(tb, 0));
        buildIfThen(tb, opens, [&](ImplicitLocOpBuilder &ob) {
          Value tile = arith::AddIOp::create(
              ob,
              toIndex(ob,
                      load(ob, e.arg("tileBase"), {at.batch, at.kv, at.leaf})),
              arith::DivUIOp::create(ob, rel, q));
          memref::StoreOp::create(ob, toI32(ob, at.leaf), e.arg("tileLeaf"),
                                  ValueRange{at.batch, at.kv, tile});
          memref::StoreOp::create(ob, toI32(ob, pos), e.arg("tileFirst"),
                                  ValueRange{at.batch, at.kv, tile});
        });
      });
  gpu::ReturnOp::create(b);
  return e;
}

BucketKernels mlir::pisa::detail::buildBucketKernels(PatternRewriter &rewriter,
                                                     Operation *anchor,
                                                     const TileProblem &p) {
  OpBuilder::InsertionGuard guard(rewriter);
  BucketKernels k;
  k.histogram = buildHistogramKernel(rewriter, anchor, p);
  k.scan = buildScanKernel(rewriter, anchor, p);
  k.scatter = buildScatterKernel(rewriter, anchor, p);
  return k;
}

int64_t mlir::pisa::detail::simtScoreThreads(const TileProblem &p) {
  return ceilDiv(p.qTile * p.groupSize, 32) * 32;
}

namespace {
/// The SIMT scorer: one block per tile, a thread per (member, head) row.
/// Each chunk of the leaf's keys is staged in shared memory as f32, every
/// thread accumulates its query row against the chunk's keys in
/// registers, and merges the chunk's masked logits into its running (max,
/// sum) in base e (the f32 path keeps exp and log); then each member's
/// head LSEs are summed.
class SimtScoreKernelBuilder {
public:
  SimtScoreKernelBuilder(const TileProblem &p)
      : p(p), threads(p.config.getThreads()), d(p.headDim),
        blockSize(p.blockSize),
        // Keys per shared-memory chunk: at most 32 KiB of f32 and 64 rows,
        // the register accumulators each thread keeps.
        rows(std::max<int64_t>(
            1, std::min<int64_t>({blockSize, 8192 / d, kMaxTileRows}))) {}

  Kernel build(PatternRewriter &rewriter, Operation *anchor);

private:
  /// The tile `tile` of the block's (batch, KV head).
  void buildTile(ImplicitLocOpBuilder &tb, Value tile);
  /// Rows row0 .. row0 + rows - 1 of the leaf's keys (zeros past N) into
  /// the key tile as f32, the threads taking consecutive elements.
  void stageChunk(ImplicitLocOpBuilder &lb, const TileSpan &span, Value row0);
  /// The thread's query row against the chunk's `rows` keys: one query
  /// element per step, the key read broadcast from shared memory.
  SmallVector<Value> chunkProducts(ImplicitLocOpBuilder &lb, Value query,
                                   Value qHead);
  /// The chunk's logits (keys at or past `limit`, and idle threads, -inf)
  /// merged into the running (max, sum).
  SmallVector<Value> mergeChunk(ImplicitLocOpBuilder &lb, ValueRange state,
                                ArrayRef<Value> acc, Value row0, Value limit,
                                Value active);
  /// The writer thread of each member sums its G head LSEs.
  void writeHeadSums(ImplicitLocOpBuilder &tb, Value active, Value member,
                     Value head, Value query, Value slot, Value g);

  const TileProblem &p;
  const int64_t threads, d, blockSize, rows;
  Kernel e;
  Value keyTile, headLse, batch, kv, tid, zero, negInf, zeroF, scale;
};
} // namespace

void SimtScoreKernelBuilder::stageChunk(ImplicitLocOpBuilder &lb,
                                        const TileSpan &span, Value row0) {
  Value cD = indexConst(lb, d);
  auto load = scf::ForOp::create(lb, tid, indexConst(lb, rows * d),
                                 indexConst(lb, threads));
  OpBuilder::InsertionGuard guard(lb);
  lb.setInsertionPointToStart(load.getBody());
  Value idx = load.getInductionVar();
  Value r = arith::DivUIOp::create(lb, idx, cD);
  Value c = arith::RemUIOp::create(lb, idx, cD);
  Value j = arith::AddIOp::create(lb, row0, r);
  Value inKeys =
      arith::CmpIOp::create(lb, arith::CmpIPredicate::ult, j, span.numKeys);
  Value v = buildIf(
      lb, inKeys, {lb.getF32Type()},
      [&](ImplicitLocOpBuilder &ib) {
        Value row = arith::AddIOp::create(ib, span.keyShift, j);
        return SmallVector<Value>{
            extractF32(ib, e.arg("keys"), {batch, kv, row, c})};
      },
      [&](ImplicitLocOpBuilder &) { return SmallVector<Value>{zeroF}; })[0];
  memref::StoreOp::create(lb, v, keyTile, ValueRange{r, c});
}

SmallVector<Value>
SimtScoreKernelBuilder::chunkProducts(ImplicitLocOpBuilder &lb, Value query,
                                      Value qHead) {
  auto fast = arith::FastMathFlags::reassoc | arith::FastMathFlags::contract;
  SmallVector<Value> init(rows, zeroF);
  const int64_t vec = d % 4 == 0 ? 4 : 1;
  return buildLoop(
      lb, zero, indexConst(lb, d), indexConst(lb, vec), init,
      [&](ImplicitLocOpBuilder &db, Value c, ValueRange a) {
        SmallVector<Value> qv;
        for (int64_t j = 0; j < vec; ++j)
          qv.push_back(
              extractF32(db, e.arg("queries"),
                         {batch, qHead, query,
                          arith::AddIOp::create(db, c, indexConst(db, j))}));
        SmallVector<Value> next;
        for (int64_t r = 0; r < rows; ++r) {
          // One 16-byte shared load feeds `vec` multiply-adds.
          Value k = vector::LoadOp::create(
              db, VectorType::get({vec}, db.getF32Type()), keyTile,
              ValueRange{indexConst(db, r), c},
              /*nontemporal=*/false, llvm::MaybeAlign(4 * vec));
          Value sum = a[r];
          for (int64_t j = 0; j < vec; ++j) {
            Value kj = vector::ExtractOp::create(db, k, ArrayRef<int64_t>{j});
            sum = arith::AddFOp::create(
                db, sum, arith::MulFOp::create(db, qv[j], kj, fast), fast);
          }
          next.push_back(sum);
        }
        return next;
      });
}

SmallVector<Value> SimtScoreKernelBuilder::mergeChunk(ImplicitLocOpBuilder &lb,
                                                      ValueRange state,
                                                      ArrayRef<Value> acc,
                                                      Value row0, Value limit,
                                                      Value active) {
  Value visible = arith::SelectOp::create(
      lb, active,
      arith::SubIOp::create(lb, arith::MaxUIOp::create(lb, limit, row0), row0),
      zero);
  SmallVector<Value> logits;
  Value chunkMax = negInf;
  for (int64_t r = 0; r < rows; ++r) {
    Value ok = arith::CmpIOp::create(lb, arith::CmpIPredicate::ult,
                                     indexConst(lb, r), visible);
    Value x = maskedLogit(lb, acc[r], ok, scale, negInf);
    logits.push_back(x);
    chunkMax = arith::MaximumFOp::create(lb, chunkMax, x);
  }
  auto [m, shift] = onlineMaxStep(lb, state[0], chunkMax);
  Value sum = arith::MulFOp::create(
      lb, state[1],
      math::ExpOp::create(lb, arith::SubFOp::create(lb, state[0], shift)));
  for (Value x : logits)
    sum = arith::AddFOp::create(
        lb, sum, math::ExpOp::create(lb, arith::SubFOp::create(lb, x, shift)));
  return {m, sum};
}

void SimtScoreKernelBuilder::writeHeadSums(ImplicitLocOpBuilder &tb,
                                           Value active, Value member,
                                           Value head, Value query, Value slot,
                                           Value g) {
  Value writer = arith::AndIOp::create(
      tb, active,
      arith::CmpIOp::create(tb, arith::CmpIPredicate::eq, head, zero));
  buildIfThen(tb, writer, [&](ImplicitLocOpBuilder &wb) {
    Value base = arith::MulIOp::create(wb, member, g);
    Value u = headSumInShared(wb, headLse, base, p.groupSize);
    memref::StoreOp::create(wb, u, e.arg("scores"),
                            ValueRange{batch, kv, query, slot});
  });
}

void SimtScoreKernelBuilder::buildTile(ImplicitLocOpBuilder &tb, Value tile) {
  TileSpan span = loadTileSpan(tb, e, p, batch, kv, tile);
  Value g = indexConst(tb, p.groupSize);
  Value member = arith::DivUIOp::create(tb, tid, g);
  Value head = arith::RemUIOp::create(tb, tid, g);
  Value active =
      arith::CmpIOp::create(tb, arith::CmpIPredicate::ult, member, span.size);
  TileMember mine = loadTileMember(tb, e, p, batch, kv, span, member);
  Value qHead =
      arith::AddIOp::create(tb, arith::MulIOp::create(tb, kv, g), head);
  Value cRows = indexConst(tb, rows);
  negInf = f32Const(tb, -std::numeric_limits<float>::infinity());
  zeroF = f32Const(tb, 0.0f);
  scale = f32Const(tb, p.scale);
  auto state = buildLoop(
      tb, zero, indexConst(tb, pisa::ceilDiv(blockSize, rows)), {negInf, zeroF},
      [&](ImplicitLocOpBuilder &lb, Value chunk, ValueRange st) {
        // Key positions (of the leaf's sequence); rows add span.keyShift.
        Value row0 = arith::AddIOp::create(
            lb, span.firstKey, arith::MulIOp::create(lb, chunk, cRows));
        stageChunk(lb, span, row0);
        gpu::BarrierOp::create(lb);
        SmallVector<Value> acc = chunkProducts(lb, mine.query, qHead);
        SmallVector<Value> next =
            mergeChunk(lb, st, acc, row0, mine.limit, active);
        gpu::BarrierOp::create(lb);
        return next;
      });
  Value lse =
      arith::AddFOp::create(tb, state[0], math::LogOp::create(tb, state[1]));
  memref::StoreOp::create(tb, lse, headLse, ValueRange{tid});
  gpu::BarrierOp::create(tb);
  writeHeadSums(tb, active, member, head, mine.query, mine.slot, g);
}

Kernel SimtScoreKernelBuilder::build(PatternRewriter &rewriter,
                                     Operation *anchor) {
  MLIRContext *ctx = rewriter.getContext();
  Type f32 = rewriter.getF32Type();
  e = createKernel(
      rewriter, anchor, "select_stage2_score_tiles", scoreKernelParams(p),
      {workgroupType(ctx, {rows, d}, f32), workgroupType(ctx, {threads}, f32)});
  gpu::GPUFuncOp scoreFunc = e.func();
  applyOccupancyHint(scoreFunc, p.config);
  // 16-byte aligned so that rows can be read with vector loads.
  scoreFunc.setWorkgroupAttributionAttr(
      0, LLVM::LLVMDialect::getAlignAttrName(), rewriter.getI64IntegerAttr(16));
  ImplicitLocOpBuilder b(anchor->getLoc(), rewriter);
  keyTile = scoreFunc.getWorkgroupAttributions()[0];
  headLse = scoreFunc.getWorkgroupAttributions()[1];
  Value heads = indexConst(b, p.kvHeads);
  batch = arith::DivUIOp::create(b, blockIdY(b), heads);
  kv = arith::RemUIOp::create(b, blockIdY(b), heads);
  Value tile = blockIdX(b);
  tid = threadIdX(b);
  zero = indexConst(b, 0);
  Value numTiles = toIndex(b, load(b, e.arg("numTiles"), {batch, kv}));
  // Uniform per block, so the barriers inside are reached by all threads.
  buildIfThen(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, tile, numTiles),
      [&](ImplicitLocOpBuilder &tb) { buildTile(tb, tile); });
  gpu::ReturnOp::create(b);
  return e;
}

Kernel mlir::pisa::detail::buildScoreKernel(PatternRewriter &rewriter,
                                            Operation *anchor,
                                            const TileProblem &p) {
  OpBuilder::InsertionGuard guard(rewriter);
  // scoreKernelParams, warpgroup tensor cores, tensor cores or SIMT.
  switch (*p.config.getVariant()) {
  case KernelVariant::Wgmma:
    return buildWgmmaScoreKernel(rewriter, anchor, p);
  case KernelVariant::MmaSync:
    return buildMmaScoreKernel(rewriter, anchor, p);
  case KernelVariant::Simt:
    break;
  }
  return SimtScoreKernelBuilder(p).build(rewriter, anchor);
}

Value mlir::pisa::detail::maxTiles(ImplicitLocOpBuilder &b, Value numQueries,
                                   Value numLeaves, int64_t candidates,
                                   int64_t qTile) {
  Value pairs =
      b.createOrFold<arith::MulIOp>(numQueries, indexConst(b, candidates));
  return b.createOrFold<arith::AddIOp>(
      b.createOrFold<arith::CeilDivUIOp>(pairs, indexConst(b, qTile)),
      numLeaves);
}

void mlir::pisa::detail::launchBucketKernels(
    ImplicitLocOpBuilder &b, const BucketKernels &k, const TileProblem &p,
    Value groups, Value numQueries, Value offset, Value contenders,
    Value counts, ArrayRef<Value> sort, ArrayRef<KernelOperand> cuSeqlens) {
  Value leafCount = sort[0], leafStart = sort[1], cursor = sort[2];
  Value tileLeaf = sort[3], tileFirst = sort[4], tileCount = sort[5];
  Value sortedPairs = sort[6], tileBase = sort[7];
  gpu::MemsetOp::create(b, Type(), ValueRange{}, leafCount,
                        b.createOrFold<arith::ConstantIntOp>(0, 32));
  Value pairBlocks = b.createOrFold<arith::CeilDivUIOp>(
      b.createOrFold<arith::MulIOp>(numQueries, indexConst(b, p.candidates)),
      indexConst(b, kPairThreads));
  SmallVector<KernelOperand> histogram{{"offset", offset},
                                       {"contenders", contenders},
                                       {"counts", counts},
                                       {"leafCount", leafCount}};
  histogram.append(cuSeqlens.begin(), cuSeqlens.end());
  launch(b, k.histogram, pairBlocks, groups, kPairThreads, histogram);
  launch(b, k.scan, indexConst(b, 1), groups, kScanLanes,
         {{"leafCount", leafCount},
          {"leafStart", leafStart},
          {"cursor", cursor},
          {"tileBase", tileBase},
          {"numTiles", tileCount}});
  SmallVector<KernelOperand> scatter{
      {"offset", offset},           {"contenders", contenders},
      {"counts", counts},           {"cursor", cursor},
      {"sortedPairs", sortedPairs}, {"leafStart", leafStart},
      {"tileBase", tileBase},       {"tileLeaf", tileLeaf},
      {"tileFirst", tileFirst}};
  scatter.append(cuSeqlens.begin(), cuSeqlens.end());
  launch(b, k.scatter, pairBlocks, groups, kPairThreads, scatter);
}

void mlir::pisa::detail::launchScoreKernel(ImplicitLocOpBuilder &b,
                                           const Kernel &kernel,
                                           KernelConfigAttr config,
                                           Value groups, Value tileBound,
                                           ArrayRef<KernelOperand> operands) {
  Value scoreBlocks = b.createOrFold<arith::CeilDivUIOp>(
      tileBound, indexConst(b, *config.getTilesPerBlock()));
  launch(b, kernel, scoreBlocks, groups, config.getThreads(), operands);
}
