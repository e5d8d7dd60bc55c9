//===- SingleStageToGPU.cpp - the single-stage selection kernels ----------===//
//
// select_single_stage (and its varlen form): one warp per (query, KV head)
// runs the whole selection, from the root to the leaves, in one kernel.
//
//===----------------------------------------------------------------------===//

#include "Pyramid/PyramidAppend.h"
#include "Selection/LaneWalk.h"
#include "Selection/LeafScoreMMA.h"
#include "Selection/PackedSequences.h"
#include "Selection/QueryKernels.h"

#include "../Common/LoopBuilders.h"

#include "pisa/Analysis/GPUTarget.h"
#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <functional>

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

namespace {

constexpr int64_t kKeysInFlight = 8;

/// Warps per query (kernel_config warps_per_query).
int64_t warpsPerQuery(const Problem &p) {
  return p.config.getWarpsPerQuery().value_or(1);
}

/// Grid x and threads of a single-stage kernel over `numQueries` queries.
std::pair<Value, int64_t> queryGrid(ImplicitLocOpBuilder &host,
                                    const Problem &p, Value numQueries) {
  int64_t warps = warpsPerQuery(p);
  if (warps > 1)
    return {numQueries, p.config.getThreads()};
  return {host.createOrFold<arith::CeilDivUIOp>(
              numQueries, indexConst(host, p.config.getThreads() / kLanes)),
          p.config.getThreads()};
}

/// Item `readAt`'s score (clamped to the last of `count`) from where an
/// exchange left the scores.
Value readSharedScore(ImplicitLocOpBuilder &b, const QueryScratch &scratch,
                      Value count, Value readAt) {
  Value at = arith::MinUIOp::create(
      b, readAt, arith::SubIOp::create(b, count, indexConst(b, 1)));
  return memref::LoadOp::create(b, scratch.shared, ValueRange{at});
}

/// Item a's score, for a < count, split over a query's block of warps
/// (shareScores); returns item `readAt`'s (clamped to the last).
Value exchangeScores(
    ImplicitLocOpBuilder &b, const QueryScratch &scratch, Value count,
    Value readAt,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> scoreOf) {
  shareScores(b, scratch, count, scoreOf);
  return readSharedScore(b, scratch, count, readAt);
}

/// Candidate a's score, for a < count, when warp w scores candidates 4 w ..
/// 4 w + 3 at once (`tileScore`: lane i returns candidate 4 w + i's, as
/// buildLevelScoreMma); returns item `readAt`'s (clamped to the last). A
/// lane walk's level: the previous level's reads of `shared` came before
/// its rank's barrier, so none is needed before the stores.
Value exchangeTileScores(
    ImplicitLocOpBuilder &b, const QueryScratch &scratch, Value count,
    Value readAt, llvm::function_ref<Value(ImplicitLocOpBuilder &)> tileScore) {
  using P = arith::CmpIPredicate;
  Value four = indexConst(b, 4);
  Value first = arith::MulIOp::create(b, scratch.warp, four);
  buildIfThen(b, cmp(b, P::ult, first, count), [&](ImplicitLocOpBuilder &tb) {
    Value u = tileScore(tb);
    Value a = arith::AddIOp::create(tb, first, scratch.lane);
    buildIfThen(tb,
                arith::AndIOp::create(tb, cmp(tb, P::ult, scratch.lane, four),
                                      cmp(tb, P::ult, a, count)),
                [&](ImplicitLocOpBuilder &sb) {
                  memref::StoreOp::create(sb, u, scratch.shared, ValueRange{a});
                });
  });
  gpu::BarrierOp::create(b);
  return readSharedScore(b, scratch, count, readAt);
}

/// Warp 0 ranks a level and hands out its kept set: the mask, and the
/// kept lanes in order (the k-th at 1 + k), so that lane j reads its
/// source, the (j / g)-th, instead of searching the mask. The others wait
/// at the barrier and read it before the next level's exchange barrier,
/// which warp 0 passes before it writes again.
static LaneKept
shareKeptSet(ImplicitLocOpBuilder &rb,
             llvm::function_ref<Value(ImplicitLocOpBuilder &)> rankKept,
             const Problem &p, const WarpSite &w) {
  const QueryScratch &scratch = *w.scratch;
  Value lane = w.lane;
  Value zero = indexConst(rb, 0), one = indexConst(rb, 1);
  buildIfThen(
      rb, cmp(rb, arith::CmpIPredicate::eq, w.warp, zero),
      [&](ImplicitLocOpBuilder &wb) {
        Value mask = rankKept(wb);
        Value bit = arith::AndIOp::create(
            wb, arith::ShRUIOp::create(wb, mask, toI32(wb, lane)),
            arith::ConstantIntOp::create(wb, 1, 32));
        buildIfThen(wb,
                    cmp(wb, arith::CmpIPredicate::ne, bit,
                        arith::ConstantIntOp::create(wb, 0, 32)),
                    [&](ImplicitLocOpBuilder &kb) {
                      Value k =
                          popCount(kb, bitsBelow(kb, mask, toI32(kb, lane)));
                      memref::StoreOp::create(
                          kb, toI32(kb, lane), scratch.sharedMask,
                          ValueRange{arith::AddIOp::create(kb, one, k)});
                    });
        buildIfThen(wb, isLaneZero(wb, lane), [&](ImplicitLocOpBuilder &sb) {
          memref::StoreOp::create(sb, mask, scratch.sharedMask,
                                  ValueRange{zero});
        });
      });
  gpu::BarrierOp::create(rb);
  Value pair = arith::MinUIOp::create(
      rb, arith::DivUIOp::create(rb, lane, indexConst(rb, p.fanout)),
      indexConst(rb, p.topK - 1));
  return LaneKept{
      memref::LoadOp::create(rb, scratch.sharedMask, ValueRange{zero}),
      toIndex(rb, memref::LoadOp::create(
                      rb, scratch.sharedMask,
                      ValueRange{arith::AddIOp::create(rb, one, pair)}))};
}

/// When the leaf contenders must be ranked (`ranked`), this lane's
/// contender's score, the `count` contenders scored split over the warps;
/// else 0. Contender a is the a-th set bit of the mask; this lane's is at
/// the number of set bits below it.
static Value scoreLeafContenders(ImplicitLocOpBuilder &gb, const Kernel &kernel,
                                 const Problem &p, const WarpSite &w,
                                 const LaneLeaves &leaves, Value count,
                                 Value ranked, const WarpScorer &rawKeys,
                                 const ChildLevel &keyLevel) {
  const QuerySite &site = w.site;
  Value lane = w.lane;
  return buildIf(
      gb, ranked, {gb.getF32Type()},
      [&](ImplicitLocOpBuilder &rb) {
        Value position =
            popCount(rb, bitsBelow(rb, leaves.mask, toI32(rb, lane)));
        // The leaves on tensor cores when the sizes allow (the query's
        // fragments loaded with the query when the levels use them too,
        // else here, after the walk's f32 rows are dead).
        std::optional<LeafMmaQuery> mmaQuery = w.leafQuery;
        if (!mmaQuery && scoresLeavesWithMma(p))
          mmaQuery = loadLeafMmaQuery(rb, kernel.arg("queries"), site,
                                      p.groupSize, p.headDim, lane);
        return SmallVector<Value>{exchangeScores(
            rb, *w.scratch, count, position,
            [&](ImplicitLocOpBuilder &lb, Value a) {
              Value leaf =
                  toIndex(lb, shuffleFrom(lb, toI32(lb, leaves.leaf),
                                          nthSetBit(lb, leaves.mask, a)));
              if (mmaQuery)
                return buildLeafScoreMma(lb, *mmaQuery, kernel.arg("keys"),
                                         site, keyLevel, leaf, p.blockSize,
                                         p.headDim, p.scale);
              return rawKeys(lb, keyLevel, leaf);
            })};
      },
      [&](ImplicitLocOpBuilder &eb) {
        return SmallVector<Value>{f32Const(eb, 0.0f)};
      })[0];
}

/// The single-stage body of a query's block of warps when a level's
/// candidates fit the lanes (g * K <= 32): every warp runs the lane walk
/// (LaneWalk.h) with its state in registers; a level or the leaves that
/// must be ranked are scored split over the warps (exchangeScores; a
/// level on tensor cores four candidates a warp when the query's mma
/// fragments were loaded, exchangeTileScores), warp 0
/// ranks a level and hands the kept set to the others (sharedMask), and
/// warp 0 alone runs the final selection and writes the row.
void buildBlockLaneSelection(ImplicitLocOpBuilder &gb, const Kernel &kernel,
                             const Problem &p, const WarpSite &w,
                             const LevelLayout &layout,
                             const WarpScorer &summaries,
                             const WarpScorer &rawKeys,
                             const ChildLevel &keyLevel) {
  const QuerySite &site = w.site;
  const QueryScratch &scratch = *w.scratch;
  Value lane = w.lane;
  // Item a's score where the exchange put it (a level's candidate a, or
  // the a-th leaf contender): warp 0 ranks reading them there.
  auto sharedScore = [&](ImplicitLocOpBuilder &sb, Value a) -> Value {
    return memref::LoadOp::create(sb, scratch.shared, ValueRange{a});
  };
  LaneLeaves leaves = buildLaneWalk(
      gb, lane, layout, p.topK, p.fanout, w.bt,
      [&](ImplicitLocOpBuilder &rb, const ChildLevel &children, Value numCausal,
          LaneNodeOf nodeOf) {
        if (w.leafQuery)
          return exchangeTileScores(
              rb, scratch, numCausal, lane, [&](ImplicitLocOpBuilder &lb) {
                return buildLevelScoreMma(
                    lb, *w.leafQuery, kernel.arg("pyramid"), site, children,
                    w.warp, numCausal, nodeOf, p.headDim, p.scale);
              });
        return exchangeScores(rb, scratch, numCausal, lane,
                              [&](ImplicitLocOpBuilder &lb, Value a) {
                                return summaries(lb, children, nodeOf(lb, a));
                              });
      },
      [&](ImplicitLocOpBuilder &rb,
          llvm::function_ref<Value(ImplicitLocOpBuilder &)> rankKept) {
        return shareKeptSet(rb, rankKept, p, w);
      },
      sharedScore);
  Value count = popCount(gb, leaves.mask);
  Value ranked = cmp(gb, arith::CmpIPredicate::ugt, count,
                     contenderSlots(gb, p.topK, w.bt));
  Value score = scoreLeafContenders(gb, kernel, p, w, leaves, count, ranked,
                                    rawKeys, keyLevel);
  // Warp 0 alone selects and writes the row.
  buildIfThen(
      gb, cmp(gb, arith::CmpIPredicate::eq, w.warp, indexConst(gb, 0)),
      [&](ImplicitLocOpBuilder &fb) {
        buildLaneFinalSelection(
            fb, lane, p.topK, p.candidates(), w.bt, leaves, ranked, score,
            [&](ImplicitLocOpBuilder &sb, Value pos, Value value) {
              memref::StoreOp::create(
                  sb, arith::IndexCastOp::create(sb, sb.getI32Type(), value),
                  kernel.arg("selection"),
                  ValueRange{site.batch, site.kvHead, site.query, pos});
            },
            sharedScore);
      });
}

/// The body of the single-stage kernel for one query warp: the walk, the
/// leaf scoring from raw keys when the contenders compete, and the final
/// selection written to `selection` (lane 0 writes).
void buildSingleStageWarp(ImplicitLocOpBuilder &gb, const Kernel &kernel,
                          const Problem &p, const WarpSite &w,
                          const LevelLayout &layout,
                          const PagedKeys *paged = nullptr) {
  const QuerySite &site = w.site;
  const QueryScratch &scratch = *w.scratch;
  Value bt = w.bt;
  WarpScorer summaries = warpScorer(w.query, kernel.arg("queries"),
                                    kernel.arg("pyramid"), p, w.lane, site);
  WarpScorer rawKeys = warpScorer(w.query, kernel.arg("queries"),
                                  kernel.arg("keys"), p, w.lane, site);
  if (scratch.warps > 1) {
    // A block per query is latency-bound: a node's g child rows and 8 of a
    // leaf's keys are loaded at once.
    summaries.rowsInFlight = p.fanout;
    rawKeys.rowsInFlight = kKeysInFlight;
  }
  ChildLevel keyLevel{w.firstKey, w.numKeys, indexConst(gb, p.blockSize),
                      indexConst(gb, 1)};
  if (paged)
    keyLevel.rowAt = [&](ImplicitLocOpBuilder &b, Value row, Value e) {
      return paged->at(b, site.batch, row, site.kvHead, e);
    };
  if (usesBlockLaneWalk(p, scratch.warps))
    return buildBlockLaneSelection(gb, kernel, p, w, layout, summaries, rawKeys,
                                   keyLevel);
  // The SIMT walk here: with the tensor-core level scorer this kernel also
  // keeps the f32 query rows for the leaves, and measured 12% slower at
  // 256K (CHANGELOG.md, "Performance history").
  Value numContenders = buildWalk(gb, {layout, p.topK}, summaries, bt, scratch);
  // Score the contenders from the raw keys when they must compete.
  Value ranked =
      arith::CmpIOp::create(gb, arith::CmpIPredicate::ugt, numContenders,
                            contenderSlots(gb, p.topK, bt));
  buildIfThen(gb, ranked, [&](ImplicitLocOpBuilder &rb) {
    scoreCandidates(
        rb, scratch, numContenders, [&](ImplicitLocOpBuilder &lb, Value a) {
          Value node = arith::IndexCastOp::create(
              lb, lb.getIndexType(),
              memref::LoadOp::create(lb, scratch.cand, ValueRange{a}));
          return rawKeys(lb, keyLevel, node);
        });
  });
  auto loadRank = sharedRankLoader(scratch);
  buildFinalSelection(
      gb, p.topK, bt, numContenders,
      [&](ImplicitLocOpBuilder &lb, Value a) -> Value {
        return arith::IndexCastOp::create(
            lb, lb.getIndexType(),
            memref::LoadOp::create(lb, scratch.cand, ValueRange{a}));
      },
      [&](ImplicitLocOpBuilder &lb, Value a) -> Value {
        return memref::LoadOp::create(lb, scratch.scores, ValueRange{a});
      },
      scratch.kept,
      [&](ImplicitLocOpBuilder &lb, Value pos, Value value) {
        buildIfThen(lb, isQueryWriter(lb, w), [&](ImplicitLocOpBuilder &sb) {
          memref::StoreOp::create(
              sb, arith::IndexCastOp::create(sb, sb.getI32Type(), value),
              kernel.arg("selection"),
              ValueRange{site.batch, site.kvHead, site.query, pos});
        });
      },
      loadRank ? IndexLoader(loadRank) : nullptr);
}

/// The single-stage body over warps that each find their own sequence
/// (`sequenceOf`) and build its layout: a packed varlen batch or a decode
/// batch of its own lengths. A warp whose sequence breaks a rule writes
/// its row as kInvalidInput (docs/semantics.md, sections 4 and 7). With
/// `warps` > 1 a query has a block of that many warps.
void buildPerSequenceSingleStage(ImplicitLocOpBuilder &b, const Kernel &kernel,
                                 const Problem &p, WarpSequenceOf sequenceOf,
                                 const PagedKeys *paged = nullptr,
                                 int64_t warps = 1) {
  forEachQueryWarp(
      b, kernel, p, kernel.arg("queries"), /*mmaLevels=*/false,
      /*batchLayout=*/nullptr, sequenceOf,
      [&](ImplicitLocOpBuilder &gb, const WarpSite &w,
          const LevelLayout &layout) {
        buildSingleStageWarp(gb, kernel, p, w, layout, paged);
      },
      [&](ImplicitLocOpBuilder &ib, const QuerySite &site, Value lane) {
        buildIfThen(ib, isLaneZero(ib, lane), [&](ImplicitLocOpBuilder &lb) {
          storeInvalidRow(lb, kernel.arg("selection"), p.topK,
                          {site.batch, site.kvHead, site.query});
        });
      },
      warps);
}

/// The cache append a decode step's selection kernel runs first.
struct AppendInputs {
  Value keys, from, to;
};

/// The walk, the leaf scoring from raw keys and the final selection, in one
/// kernel; with `append`, a decode step's append first, in the same blocks
/// (each owns one sequence's cache): one launch, not two.
template <typename OpTy>
static void lowerSingleStage(OpTy op, PatternRewriter &rewriter,
                             ImplicitLocOpBuilder &host,
                             std::optional<AppendInputs> append,
                             std::optional<uint64_t> capacity) {
  Problem p =
      problemOf(op.getQueries(), op.getKeys(), op.getTopk(), op.getBranching(),
                op.getBlockSize(), op.getScale().convertToFloat(), Value());
  p.config = getKernelConfig(op);
  SmallVector<KernelParam> params{{"queries", p.queries},
                                  {"keys", bufferType(op.getKeys())},
                                  {"pyramid", bufferType(op.getPyramid())},
                                  {"offset", rewriter.getIndexType()},
                                  {"selection", bufferType(op.getSelection())}};
  if (append)
    params.append({{"appendKeys", bufferType(append->keys)},
                   {"appendFrom", bufferType(append->from)},
                   {"appendTo", bufferType(append->to)}});
  Kernel kernel;
  {
    OpBuilder::InsertionGuard guard(rewriter);
    kernel = createKernel(
        rewriter, op,
        append ? "append_select_single_stage" : "select_single_stage", params,
        exchangeTypes(rewriter.getContext(), p, warpsPerQuery(p)),
        scratchTypes(rewriter.getContext(), p));
    applyOccupancyHint(kernel.func(), p.config);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    if (append) {
      emitPyramidAppend(b,
                        {kernel.arg("appendKeys"), kernel.arg("appendFrom"),
                         kernel.arg("appendTo"), kernel.arg("pyramid")},
                        p.blockSize, p.fanout, warpsPerQuery(p) * kLanes);
    }
    Value numKeys = dimOf(b, kernel.arg("keys"), 2);
    LevelLayout layout(b, numKeys, p.blockSize, p.fanout, Value(),
                       capacity ? indexConst(b, int64_t(*capacity)) : Value());
    forEachQueryWarp(
        b, kernel, p, kernel.arg("queries"), /*mmaLevels=*/false, &layout,
        [&](ImplicitLocOpBuilder &sb, Value batch, Value row) {
          return batchedSequence(sb, batch, row, kernel.arg("offset"), numKeys);
        },
        [&](ImplicitLocOpBuilder &gb, const WarpSite &w,
            const LevelLayout &layout) {
          // The cache's new nodes are visible to the whole block before
          // the walk reads them; the warps not appending have loaded the
          // query meanwhile.
          if (append)
            gpu::BarrierOp::create(gb);
          buildSingleStageWarp(gb, kernel, p, w, layout);
        },
        nullptr, warpsPerQuery(p));
  }
  auto [gridX, threads] = queryGrid(host, p, dimOf(host, op.getQueries(), 2));
  SmallVector<KernelOperand> operands{{"queries", op.getQueries()},
                                      {"keys", op.getKeys()},
                                      {"pyramid", op.getPyramid()},
                                      {"offset", op.getQueryOffset()},
                                      {"selection", op.getSelection()}};
  if (append)
    operands.append({{"appendKeys", append->keys},
                     {"appendFrom", append->from},
                     {"appendTo", append->to}});
  launch(host, kernel, gridX, groupsOf(host, op.getSelection(), p.kvHeads),
         threads, operands);
}

struct SelectSingleStageToGPU : KernelOpPattern<SelectSingleStageKernelOp> {
  using KernelOpPattern::KernelOpPattern;
  void lower(SelectSingleStageKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    lowerSingleStage(op, rewriter, host, std::nullopt, op.getCapacity());
  }
};

/// A decode step fused by --pisa-fuse-decode-append.
struct AppendSelectSingleStageToGPU
    : KernelOpPattern<AppendSelectSingleStageKernelOp> {
  using KernelOpPattern::KernelOpPattern;
  void lower(AppendSelectSingleStageKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    lowerSingleStage(
        op, rewriter, host,
        AppendInputs{op.getAppendKeys(), op.getAppendFrom(), op.getAppendTo()},
        op.getCapacity());
  }
};

/// The single-stage kernel over a packed varlen batch: each warp finds its
/// sequence from its query row (PackedSequences.h).
struct SelectSingleStageVarlenToGPU
    : KernelOpPattern<SelectSingleStageVarlenKernelOp> {
  using KernelOpPattern::KernelOpPattern;
  void lower(SelectSingleStageVarlenKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    Value queries = viewAsBatchOfOne(host, op.getQueries());
    Value keys = viewAsBatchOfOne(host, op.getKeys());
    Value pyramid = viewAsBatchOfOne(host, op.getPyramid());
    Value selection = viewAsBatchOfOne(host, op.getSelection());
    Problem p =
        problemOf(queries, keys, op.getTopk(), op.getBranching(),
                  op.getBlockSize(), op.getScale().convertToFloat(), Value());
    p.config = getKernelConfig(op);
    Kernel kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      kernel = createKernel(rewriter, op, "select_single_stage_varlen",
                            {{"queries", p.queries},
                             {"keys", bufferType(keys)},
                             {"pyramid", bufferType(pyramid)},
                             {"cuSeqlensQ", bufferType(op.getCuSeqlensQ())},
                             {"cuSeqlensK", bufferType(op.getCuSeqlensK())},
                             {"selection", bufferType(selection)}},
                            {}, scratchTypes(rewriter.getContext(), p));
      applyOccupancyHint(kernel.func(), p.config);
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      buildPerSequenceSingleStage(
          b, kernel, p, [&](ImplicitLocOpBuilder &sb, Value batch, Value row) {
            return packedSequence(
                sb, kernel.arg("cuSeqlensQ"), kernel.arg("cuSeqlensK"),
                dimOf(sb, kernel.arg("queries"), 2),
                dimOf(sb, kernel.arg("keys"), 2), batch, row, p.blockSize);
          });
    }
    auto [gridX, threads] = queryGrid(host, p, dimOf(host, queries, 2));
    launch(host, kernel, gridX, indexConst(host, p.kvHeads), threads,
           {{"queries", queries},
            {"keys", keys},
            {"pyramid", pyramid},
            {"cuSeqlensQ", op.getCuSeqlensQ()},
            {"cuSeqlensK", op.getCuSeqlensK()},
            {"selection", selection}});
  }
};

/// Batched decode over caches: the single-stage kernel, each warp reading
/// its sequence's length N_b from seq_lens (its queries the last Nq
/// positions) and walking the cache's capacity layout; a length outside
/// [Nq, Ncap] gives its rows kInvalidInput. With a block table the keys
/// are a page pool [P, S, Hkv, d] read through it, and a page below N_b
/// outside [0, P) gives kInvalidInput too.
struct SelectDecodeToGPU : KernelOpPattern<SelectDecodeKernelOp> {
  using KernelOpPattern::KernelOpPattern;
  void lower(SelectDecodeKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    // The cache's [B, Hkv, ...] gives the heads, paged keys or not.
    Problem p = problemOf(op.getQueries(), op.getPyramid(), op.getTopk(),
                          op.getBranching(), op.getBlockSize(),
                          op.getScale().convertToFloat(), Value());
    p.config = getKernelConfig(op);
    Value table = op.getBlockTable();
    MemRefType keysMem = bufferType(op.getKeys());
    const int64_t pageSize = table ? keysMem.getShape()[1] : 0;
    const int64_t capacity = table ? bufferType(table).getShape()[1] * pageSize
                                   : keysMem.getShape()[2];
    SmallVector<KernelParam> params{{"queries", p.queries},
                                    {"keys", keysMem},
                                    {"pyramid", bufferType(op.getPyramid())},
                                    {"seqLens", bufferType(op.getSeqLens())}};
    if (table)
      params.push_back({"blockTable", bufferType(table)});
    params.push_back({"selection", bufferType(op.getSelection())});
    Kernel kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      kernel = createKernel(
          rewriter, op, "select_decode", params,
          exchangeTypes(rewriter.getContext(), p, warpsPerQuery(p)),
          scratchTypes(rewriter.getContext(), p));
      applyOccupancyHint(kernel.func(), p.config);
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      std::optional<PagedKeys> paged;
      if (table)
        paged =
            PagedKeys{kernel.arg("blockTable"), kernel.arg("keys"), pageSize};
      buildPerSequenceSingleStage(
          b, kernel, p,
          [&](ImplicitLocOpBuilder &sb, Value batch, Value row) {
            using P = arith::CmpIPredicate;
            Value numQueries = dimOf(sb, kernel.arg("queries"), 2);
            // Signed: a negative length breaks the rule too.
            Value n = toIndex(
                sb, memref::LoadOp::create(sb, kernel.arg("seqLens"), batch));
            Value cap = indexConst(sb, capacity);
            Value valid = arith::AndIOp::create(
                sb, cmp(sb, P::sle, numQueries, n), cmp(sb, P::sle, n, cap));
            if (paged)
              valid = arith::AndIOp::create(
                  sb, valid, pagesInPool(sb, *paged, batch, n, cap));
            WarpSequence seq = batchedSequence(
                sb, batch, row, arith::SubIOp::create(sb, n, numQueries), n);
            seq.valid = valid;
            seq.capacity = cap;
            return seq;
          },
          paged ? &*paged : nullptr, warpsPerQuery(p));
    }
    SmallVector<KernelOperand> operands{{"queries", op.getQueries()},
                                        {"keys", op.getKeys()},
                                        {"pyramid", op.getPyramid()},
                                        {"seqLens", op.getSeqLens()},
                                        {"selection", op.getSelection()}};
    if (table)
      operands.push_back({"blockTable", table});
    auto [gridX, threads] = queryGrid(host, p, dimOf(host, op.getQueries(), 2));
    launch(host, kernel, gridX, groupsOf(host, op.getSelection(), p.kvHeads),
           threads, operands);
  }

  /// Whether the pages holding keys 0 .. n - 1 of sequence `batch` all lie
  /// in [0, P): the warp's lanes split the table's entries and combine
  /// their verdicts with shuffles (uniform over the warp).
  static Value pagesInPool(ImplicitLocOpBuilder &b, const PagedKeys &paged,
                           Value batch, Value n, Value cap) {
    using P = arith::CmpIPredicate;
    Value lane = arith::RemUIOp::create(b, threadIdX(b), indexConst(b, kLanes));
    Value pages = paged.pagesBelow(b, n, cap);
    Value numPages = dimOf(b, paged.pool, 0);
    Value zero32 = arith::ConstantIntOp::create(b, 0, 32);
    Value bad = buildLoop(
        b, lane, pages, indexConst(b, kLanes), ValueRange{zero32},
        [&](ImplicitLocOpBuilder &lb, Value i, ValueRange st) {
          Value outside = paged.outside(lb, batch, i, numPages);
          return SmallVector<Value>{arith::OrIOp::create(
              lb, st[0], arith::ExtUIOp::create(lb, lb.getI32Type(), outside))};
        })[0];
    for (int64_t mask = 1; mask < kLanes; mask *= 2)
      bad = arith::OrIOp::create(b, bad, shuffleXor(b, bad, mask));
    return cmp(b, P::eq, bad, zero32);
  }
};

} // namespace

void mlir::pisa::detail::addSingleStagePatterns(RewritePatternSet &patterns) {
  patterns.add<SelectSingleStageToGPU, AppendSelectSingleStageToGPU,
               SelectSingleStageVarlenToGPU, SelectDecodeToGPU>(
      patterns.getContext());
}
