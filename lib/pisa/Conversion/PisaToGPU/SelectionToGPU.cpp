//===- SelectionToGPU.cpp - selection kernel ops to gpu kernels -----------===//
//
// One pattern per kernel-level op of pisa.hier_topk (buffer form), each
// building its gpu.func(s) and launching them where the op was:
//
// select_single_stage: one warp per (query, KV head) runs the whole
// selection, from the root to the leaves, in one kernel.
//
// two_stage: (fragment_planes) the pyramid as bf16 mma fragments; (walk)
// one warp per (query, KV head) walks levels L..2 and writes its leaf
// contenders (at most g*K); (bucket) a counting sort by leaf groups the
// (query, contender) pairs that need scoring: histogram, scan (which also
// cuts every leaf's group into tiles of at most Q_tile queries), scatter;
// (score_tiles) one block per tile loads the leaf's d x C key tile into
// shared memory once and scores the tile's Q_tile x G heads against it;
// (select_final) one thread per (query, KV head) keeps the forced blocks
// and the best contenders.
//
//===----------------------------------------------------------------------===//

#include "DeviceSelection.h"
#include "KernelBuilder.h"
#include "PackedSequences.h"
#include "TileScoring.h"
#include "WarpWalkMMA.h"

#include "../Common/LoopBuilders.h"
#include "../Common/VarlenRows.h"

#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

namespace {

constexpr int64_t kQueryThreads = 128;
/// Walk kernels give each query a warp: its lanes split every dot product
/// over d and run the (cheap, uniform) selection logic redundantly.
constexpr int64_t kLanes = 32;
constexpr int64_t kWarpQueries = kQueryThreads / kLanes;

/// Sizes of a selection kernel, read from its op. B, N and Nq may be
/// dynamic: kernels read Nq from their buffers and N from "numKeys" (or the
/// keys' size); a constant N stays a constant, so walks unroll.
struct Problem {
  int64_t kvHeads, groupSize, headDim;
  int64_t topK, fanout, blockSize;
  float scale;
  MemRefType queries;
  std::optional<int64_t> numKeys; ///< N when it is a constant
  int64_t candidates() const { return fanout * topK; }
  bool dynamicKeys() const { return !numKeys; }
};

MemRefType bufferType(Value v) { return cast<MemRefType>(v.getType()); }

/// The problem of a kernel op reading `queries` [B, Hq, Nq, d] for KV heads
/// of `perKvHead` [B, Hkv, ...].
Problem problemOf(Value queries, Value perKvHead, int64_t topK, int64_t fanout,
                  int64_t blockSize, float scale, Value numKeys) {
  ArrayRef<int64_t> q = bufferType(queries).getShape();
  int64_t kvHeads = bufferType(perKvHead).getShape()[1];
  return {kvHeads, q[1] / kvHeads, q[3], topK, fanout, blockSize, scale,
          bufferType(queries), getConstantIntValue(numKeys)};
}

/// The "numKeys" parameter of kernels that take no keys buffer: only when N
/// is dynamic (a static N stays a constant, so their walks unroll).
SmallVector<KernelParam> keyCountParam(const Problem &p, Type index) {
  if (!p.dynamicKeys())
    return {};
  return {{"numKeys", index}};
}

/// N inside a kernel built with keyCountParam.
Value keyCount(ImplicitLocOpBuilder &b, const Kernel &kernel, const Problem &p) {
  return p.dynamicKeys() ? kernel.arg("numKeys") : indexConst(b, *p.numKeys);
}

/// Launch operands for keyCountParam.
SmallVector<KernelOperand> keyCountOperand(const Problem &p, Value numKeys) {
  if (!p.dynamicKeys())
    return {};
  return {{"numKeys", numKeys}};
}

/// Thread coordinates of a per-(query, KV head) kernel, and a guard that
/// the query exists. Returns {batch, kvHead, query, inRange}.
SmallVector<Value> queryThread(ImplicitLocOpBuilder &b, const Problem &p,
                               Value numQueries) {
  Value i = arith::AddIOp::create(
      b, arith::MulIOp::create(b, blockIdX(b), indexConst(b, kQueryThreads)),
      threadIdX(b));
  Value bk = blockIdY(b);
  Value heads = indexConst(b, p.kvHeads);
  Value inRange = arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i,
                                        numQueries);
  return {arith::DivUIOp::create(b, bk, heads),
          arith::RemUIOp::create(b, bk, heads), i, inRange};
}

/// Warp coordinates of a per-(query, KV head) warp kernel:
/// {batch, kvHead, query, inRange, lane}. inRange is uniform per warp.
SmallVector<Value> queryWarp(ImplicitLocOpBuilder &b, const Problem &p,
                             Value numQueries) {
  Value tid = threadIdX(b);
  Value lanes = indexConst(b, kLanes);
  Value i = arith::AddIOp::create(
      b, arith::MulIOp::create(b, blockIdX(b), indexConst(b, kWarpQueries)),
      arith::DivUIOp::create(b, tid, lanes));
  Value bk = blockIdY(b);
  Value heads = indexConst(b, p.kvHeads);
  Value inRange = arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i,
                                        numQueries);
  return {arith::DivUIOp::create(b, bk, heads),
          arith::RemUIOp::create(b, bk, heads), i, inRange,
          arith::RemUIOp::create(b, tid, lanes)};
}

/// Score operands for a warp kernel: lanes split every dot product over d
/// (coalesced row loads, one butterfly per dot). Giving each head its own
/// lanes instead was measured slower on the H200 (walk 0.55 -> 0.77 ms at
/// N = 4K: strided query rows, long FMA chains); see docs/performance.md.
ScoreOperands warpOperands(Value queries, Value children, const Problem &p,
                           Value lane) {
  ScoreOperands operands{queries, children, p.groupSize, p.headDim, p.scale};
  operands.lanes = kLanes;
  operands.lane = lane;
  operands.laneSum = [](ImplicitLocOpBuilder &b, Value v) {
    return laneGroupSum(b, v, kLanes);
  };
  return operands;
}

/// The warp's way to score a node of `children`: from the query held in
/// registers when it fits, else lanes splitting each head's dot product.
struct WarpScorer {
  std::optional<WarpQuery> query;
  ScoreOperands operands;
  QuerySite site;
  Value children;
  float scale;
  Value operator()(ImplicitLocOpBuilder &b, const ChildLevel &level,
                   Value node) const {
    if (query)
      return buildWarpGroupScore(b, *query, children, site, level, node, scale);
    return buildGroupScore(b, operands, site, level, node);
  }
};

WarpScorer warpScorer(const std::optional<WarpQuery> &query, Value queries,
                      Value children, const Problem &p, Value lane,
                      const QuerySite &site) {
  return WarpScorer{query, warpOperands(queries, children, p, lane), site,
                    children, p.scale};
}

Value isLaneZero(ImplicitLocOpBuilder &b, Value lane) {
  return arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane,
                               indexConst(b, 0));
}

/// The kernel's private scratch arrays, if it has them (the tensor-core
/// walk keeps its state in registers and has none).
std::optional<QueryScratch> scratchOf(const Kernel &kernel) {
  auto privates = kernel.func().getPrivateAttributions();
  if (privates.empty())
    return std::nullopt;
  return QueryScratch{privates[0], privates[1], privates[2]};
}

SmallVector<Type> scratchTypes(MLIRContext *ctx, const Problem &p) {
  IntegerType i32 = IntegerType::get(ctx, 32);
  return {privateType(ctx, {p.candidates()}, i32),
          privateType(ctx, {p.topK}, i32),
          privateType(ctx, {p.candidates()}, Float32Type::get(ctx))};
}

/// Emits `body` under `if (cond)` and a gpu.return after it.
void guarded(ImplicitLocOpBuilder &b, Value cond,
             llvm::function_ref<void(ImplicitLocOpBuilder &)> body) {
  auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    body(b);
  }
  gpu::ReturnOp::create(b);
}

/// The sequence of a query warp: its row of the [B, H, T, X] buffers (or
/// views), its position, N and where its keys and pyramid rows start. A
/// batch index is one sequence; a packed varlen batch finds its own.
struct WarpSequence {
  Value batch, query, position, numKeys;
  Value firstKey;        ///< first key row (0 for a batch)
  Value firstPyramidRow; ///< null: row 0
  Value valid;           ///< null: always; else the body runs only if it holds
};
using WarpSequenceOf = llvm::function_ref<WarpSequence(
    ImplicitLocOpBuilder &, Value batch, Value row)>;

/// One query's warp inside a walk kernel: where it is, its private scratch
/// and its query rows (in registers when they fit).
struct WarpSite {
  QuerySite site;
  Value lane, bt;
  Value numKeys, firstKey;
  std::optional<QueryScratch> scratch;
  std::optional<WarpQuery> query;
  /// A fragments when the walk's levels score on tensor cores.
  std::optional<MmaWalkQuery> mmaQuery;
};

using QueryWarpBody = llvm::function_ref<void(
    ImplicitLocOpBuilder &, const WarpSite &, const LevelLayout &)>;
/// What a warp whose sequence breaks a rule does instead (site and lane).
using InvalidQueryBody = llvm::function_ref<void(
    ImplicitLocOpBuilder &, const QuerySite &, Value lane)>;

/// Emits the prologue shared by the walk kernels (warp coordinates, the
/// in-range guard, the warp's sequence and its layout, b_t, the query: A
/// fragments when `mmaLevels` (the levels score on tensor cores), else f32
/// rows in registers when they fit) and `body` under the guard. A batch
/// gives its one `batchLayout` (built before the guard); a packed batch
/// builds each warp's from its sequence.
void forEachQueryWarp(ImplicitLocOpBuilder &b, const Kernel &kernel,
                      const Problem &p, Value queries, bool mmaLevels,
                      const LevelLayout *batchLayout,
                      WarpSequenceOf sequenceOf, QueryWarpBody body,
                      InvalidQueryBody invalid = nullptr) {
  SmallVector<Value> at = queryWarp(b, p, dimOf(b, queries, 2));
  guarded(b, at[3], [&](ImplicitLocOpBuilder &gb) {
    WarpSequence seq = sequenceOf(gb, at[0], at[2]);
    auto run = [&](ImplicitLocOpBuilder &rb) {
      std::optional<LevelLayout> own;
      if (!batchLayout)
        own.emplace(rb, seq.numKeys, p.blockSize, p.fanout,
                    seq.firstPyramidRow);
      const LevelLayout &layout = batchLayout ? *batchLayout : *own;
      WarpSite w{{seq.batch, at[1], seq.query, seq.position},
                 at[4],
                 leafOfPosition(rb, layout, seq.position),
                 seq.numKeys,
                 seq.firstKey,
                 scratchOf(kernel),
                 std::nullopt,
                 std::nullopt};
      if (mmaLevels)
        w.mmaQuery = loadMmaWalkQuery(rb, queries, w.site, p.headDim, w.lane);
      else
        w.query = loadWarpQuery(rb, queries, w.site, p.groupSize, p.headDim,
                                w.lane);
      body(rb, w, layout);
    };
    if (!seq.valid)
      return run(gb);
    auto ifOp = scf::IfOp::create(gb, seq.valid, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(gb);
    gb.setInsertionPointToStart(ifOp.thenBlock());
    run(gb);
    gb.setInsertionPointToStart(ifOp.elseBlock());
    if (invalid)
      invalid(gb, {seq.batch, at[1], seq.query, seq.position}, at[4]);
  });
}

/// The sequence of a batched kernel's warp: batch `batch`, N = `numKeys`,
/// position offset + row.
WarpSequence batchedSequence(ImplicitLocOpBuilder &b, Value batch, Value row,
                             Value offset, Value numKeys) {
  return {batch, row, arith::AddIOp::create(b, offset, row), numKeys,
          indexConst(b, 0), Value(), Value()};
}

/// B * Hkv on the host, for grid y.
Value groupsOf(ImplicitLocOpBuilder &b, Value perKvHead, int64_t kvHeads) {
  return b.createOrFold<arith::MulIOp>(dimOf(b, perKvHead, 0),
                                       indexConst(b, kvHeads));
}

/// Base of the patterns: they lower the buffer form only (bufferization
/// comes first), build the kernels at the end of @pisa_kernels and the
/// launches where the op was, then erase it.
template <typename OpTy> struct KernelOpPattern : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const final {
    if (!op.hasPureBufferSemantics())
      return rewriter.notifyMatchFailure(op, "expected the buffer form");
    viewTokenMajorOperands(rewriter, op);
    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder host(op.getLoc(), rewriter);
    lower(op, rewriter, host);
    rewriter.eraseOp(op);
    return success();
  }
  virtual void lower(OpTy op, PatternRewriter &rewriter,
                     ImplicitLocOpBuilder &host) const = 0;
};

/// Writes the K entries kInvalidInput of a row of `selection`.
void storeInvalidRow(ImplicitLocOpBuilder &b, Value selection, int64_t topK,
                     ValueRange row) {
  Value marker = arith::ConstantIntOp::create(b, kInvalidInput, 32);
  buildLoop(b, indexConst(b, 0), indexConst(b, topK), {},
            [&](ImplicitLocOpBuilder &sb, Value pos, ValueRange) {
              SmallVector<Value> at(row.begin(), row.end());
              at.push_back(pos);
              memref::StoreOp::create(sb, marker, selection, at);
              return SmallVector<Value>{};
            });
}

/// The sequence of packed query row `row` for a walk kernel (keys or
/// numKeyRows give Tk).
WarpSequence packedSequence(ImplicitLocOpBuilder &b, Value cuQ, Value cuK,
                            Value numQueryRows, Value numKeyRows, Value batch,
                            Value row, int64_t blockSize) {
  QueryRowSequence seq =
      sequenceOfQueryRow(b, cuQ, cuK, numQueryRows, numKeyRows, row);
  return WarpSequence{batch,
                      row,
                      seq.position,
                      seq.keys.count,
                      seq.keys.first,
                      firstPyramidRow(b, seq.keys.first, seq.seq, blockSize),
                      seq.valid};
}

/// The body of the single-stage kernel for one query warp: the walk, the
/// leaf scoring from raw keys when the contenders compete, and the final
/// selection written to `selection` (lane 0 writes).
void buildSingleStageWarp(ImplicitLocOpBuilder &gb, const Kernel &kernel,
                          const Problem &p, const WarpSite &w,
                          const LevelLayout &layout) {
  const QuerySite &site = w.site;
  const QueryScratch &scratch = *w.scratch;
  Value bt = w.bt;
  WarpScorer summaries = warpScorer(w.query, kernel.arg("queries"),
                                    kernel.arg("pyramid"), p, w.lane, site);
  WarpScorer rawKeys = warpScorer(w.query, kernel.arg("queries"),
                                  kernel.arg("keys"), p, w.lane, site);
  // The SIMT walk here: with the tensor-core level scorer this kernel also
  // keeps the f32 query rows for the leaves, and measured 12% slower at
  // 256K (docs/performance.md, v9).
  Value numContenders = buildWalk(gb, {layout, p.topK}, summaries, bt, scratch);
  // Score the contenders from the raw keys when they must compete.
  Value zero = indexConst(gb, 0);
  Value ranked = arith::CmpIOp::create(gb, arith::CmpIPredicate::ugt,
                                       numContenders,
                                       contenderSlots(gb, p.topK, bt));
  ChildLevel keyLevel{w.firstKey, w.numKeys, indexConst(gb, p.blockSize),
                      indexConst(gb, 1)};
  buildIfThen(gb, ranked, [&](ImplicitLocOpBuilder &rb) {
    buildLoop(rb, zero, numContenders, {},
              [&](ImplicitLocOpBuilder &lb, Value a, ValueRange) {
                Value node = arith::IndexCastOp::create(
                    lb, lb.getIndexType(),
                    memref::LoadOp::create(lb, scratch.cand, ValueRange{a}));
                Value u = rawKeys(lb, keyLevel, node);
                memref::StoreOp::create(lb, u, scratch.scores, ValueRange{a});
                return SmallVector<Value>{};
              });
  });
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
        buildIfThen(lb, isLaneZero(lb, w.lane), [&](ImplicitLocOpBuilder &sb) {
          memref::StoreOp::create(
              sb, arith::IndexCastOp::create(sb, sb.getI32Type(), value),
              kernel.arg("selection"),
              ValueRange{site.batch, site.kvHead, site.query, pos});
        });
      });
}

/// The walk, the leaf scoring from raw keys and the final selection, in one
/// kernel.
struct SelectSingleStageToGPU : KernelOpPattern<SelectSingleStageKernelOp> {
  using KernelOpPattern::KernelOpPattern;
  void lower(SelectSingleStageKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    Problem p = problemOf(op.getQueries(), op.getKeys(), op.getTopk(),
                          op.getBranching(), op.getBlockSize(),
                          op.getScale().convertToFloat(), Value());
    Kernel kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      kernel = createKernel(rewriter, op, "select_single_stage",
                            {{"queries", p.queries},
                             {"keys", bufferType(op.getKeys())},
                             {"pyramid", bufferType(op.getPyramid())},
                             {"offset", rewriter.getIndexType()},
                             {"selection", bufferType(op.getSelection())}},
                            {}, scratchTypes(rewriter.getContext(), p));
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      Value numKeys = dimOf(b, kernel.arg("keys"), 2);
      LevelLayout layout(b, numKeys, p.blockSize, p.fanout);
      forEachQueryWarp(
          b, kernel, p, kernel.arg("queries"), /*mmaLevels=*/false, &layout,
          [&](ImplicitLocOpBuilder &sb, Value batch, Value row) {
            return batchedSequence(sb, batch, row, kernel.arg("offset"),
                                   numKeys);
          },
          [&](ImplicitLocOpBuilder &gb, const WarpSite &w,
              const LevelLayout &layout) {
            buildSingleStageWarp(gb, kernel, p, w, layout);
          });
    }
    launch(host, kernel,
           host.createOrFold<arith::CeilDivUIOp>(
               dimOf(host, op.getQueries(), 2), indexConst(host, kWarpQueries)),
           groupsOf(host, op.getSelection(), p.kvHeads), kQueryThreads,
           {{"queries", op.getQueries()},
            {"keys", op.getKeys()},
            {"pyramid", op.getPyramid()},
            {"offset", op.getQueryOffset()},
            {"selection", op.getSelection()}});
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
    Problem p = problemOf(queries, keys, op.getTopk(), op.getBranching(),
                          op.getBlockSize(), op.getScale().convertToFloat(),
                          Value());
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
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      forEachQueryWarp(
          b, kernel, p, kernel.arg("queries"), /*mmaLevels=*/false,
          /*batchLayout=*/nullptr,
          [&](ImplicitLocOpBuilder &sb, Value batch, Value row) {
            return packedSequence(sb, kernel.arg("cuSeqlensQ"),
                                  kernel.arg("cuSeqlensK"),
                                  dimOf(sb, kernel.arg("queries"), 2),
                                  dimOf(sb, kernel.arg("keys"), 2), batch, row,
                                  p.blockSize);
          },
          [&](ImplicitLocOpBuilder &gb, const WarpSite &w,
              const LevelLayout &layout) {
            buildSingleStageWarp(gb, kernel, p, w, layout);
          },
          // A row of a sequence whose cu_seqlens break a rule: all
          // kInvalidInput (docs/semantics.md, section 7).
          [&](ImplicitLocOpBuilder &ib, const QuerySite &site, Value lane) {
            buildIfThen(ib, isLaneZero(ib, lane), [&](ImplicitLocOpBuilder &lb) {
              storeInvalidRow(lb, kernel.arg("selection"), p.topK,
                              {site.batch, site.kvHead, site.query});
            });
          });
    }
    launch(host, kernel,
           host.createOrFold<arith::CeilDivUIOp>(dimOf(host, queries, 2),
                                                 indexConst(host, kWarpQueries)),
           indexConst(host, p.kvHeads), kQueryThreads,
           {{"queries", queries},
            {"keys", keys},
            {"pyramid", pyramid},
            {"cuSeqlensQ", op.getCuSeqlensQ()},
            {"cuSeqlensK", op.getCuSeqlensK()},
            {"selection", selection}});
  }
};

struct FragmentPlanesToGPU : KernelOpPattern<FragmentPlanesKernelOp> {
  using KernelOpPattern::KernelOpPattern;
  void lower(FragmentPlanesKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    Kernel kernel =
        buildFragmentPlanesKernel(rewriter, op, bufferType(op.getPyramid()));
    int64_t kvHeads = bufferType(op.getPyramid()).getShape()[1];
    launch(host, kernel, fragmentPlanesBlocks(host, op.getPyramid()),
           groupsOf(host, op.getPyramid(), kvHeads), kFragmentPlanesThreads,
           {{"pyramid", op.getPyramid()}, {"planes", op.getPlanes()}});
  }
};

/// Stage 1: the walk down to the leaf contenders. On tensor cores it reads
/// the pyramid as bf16 fragment planes.
struct WalkToGPU : KernelOpPattern<WalkKernelOp> {
  using KernelOpPattern::KernelOpPattern;
  void lower(WalkKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    Problem p = problemOf(op.getQueries(), op.getContenders(), op.getTopk(),
                          op.getBranching(), op.getBlockSize(),
                          op.getScale().convertToFloat(), op.getNumKeys());
    const bool mmaWalk = op.getTensorCores();
    const bool packed = bool(op.getCuSeqlensQ());
    Type index = rewriter.getIndexType();
    Kernel walkKernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      SmallVector<KernelParam> walkParams{
          {"queries", p.queries},
          {"pyramid", bufferType(op.getPyramid())},
          {"offset", index},
          {"contenders", bufferType(op.getContenders())},
          {"counts", bufferType(op.getCounts())}};
      if (packed)
        walkParams.append({{"cuSeqlensQ", bufferType(op.getCuSeqlensQ())},
                           {"cuSeqlensK", bufferType(op.getCuSeqlensK())},
                           {"numKeyRows", index}});
      else
        walkParams.append(keyCountParam(p, index));
      walkKernel = createKernel(
          rewriter, op, "select_stage1_walk", walkParams, {},
          mmaWalk ? SmallVector<Type>{}
                  : scratchTypes(rewriter.getContext(), p));
      if (mmaWalk) {
        // The tensor-core walk is latency-bound (ncu: L1 scoreboard stalls
        // at 5 blocks per SM with 106 registers); ptxas fits 8 blocks (64
        // registers) without spills for g*K <= 16, 6 (80) for 32.
        setOccupancyHint(walkKernel.func(), kQueryThreads,
                         p.candidates() <= 16 ? 8 : 6);
      }
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      Value numKeys = packed ? Value() : keyCount(b, walkKernel, p);
      std::optional<LevelLayout> batchLayout;
      if (!packed)
        batchLayout.emplace(b, numKeys, p.blockSize, p.fanout);
      auto sequenceOf = [&](ImplicitLocOpBuilder &sb, Value batch,
                            Value row) {
        if (!packed)
          return batchedSequence(sb, batch, row, walkKernel.arg("offset"),
                                 numKeys);
        return packedSequence(sb, walkKernel.arg("cuSeqlensQ"),
                              walkKernel.arg("cuSeqlensK"),
                              dimOf(sb, walkKernel.arg("queries"), 2),
                              walkKernel.arg("numKeyRows"), batch, row,
                              p.blockSize);
      };
      // A row of a batch that breaks a rule: no contender (the final
      // kernel writes its kInvalidInput row).
      auto noContenders = [&](ImplicitLocOpBuilder &ib, const QuerySite &site,
                              Value lane) {
        buildIfThen(ib, isLaneZero(ib, lane), [&](ImplicitLocOpBuilder &lb) {
          memref::StoreOp::create(
              lb, arith::ConstantIntOp::create(lb, 0, 32),
              walkKernel.arg("counts"),
              ValueRange{site.batch, site.kvHead, site.query});
        });
      };
      forEachQueryWarp(b, walkKernel, p, walkKernel.arg("queries"), mmaWalk,
                       batchLayout ? &*batchLayout : nullptr, sequenceOf,
                       [&](ImplicitLocOpBuilder &gb, const WarpSite &w,
                           const LevelLayout &walkLayout) {
        const QuerySite &site = w.site;
        Value bt = w.bt;
        const std::optional<WarpQuery> &query = w.query;
        Value n;
        if (w.mmaQuery) {
          // Lane a holds contender a: each lane writes its own.
          n = buildMmaWarpWalk(
              gb, *w.mmaQuery, walkKernel.arg("pyramid"), site, walkLayout, p.topK,
              bt, p.headDim, p.scale,
              [&](ImplicitLocOpBuilder &lb, Value pos, Value leaf) {
                memref::StoreOp::create(
                    lb, arith::IndexCastOp::create(lb, lb.getI32Type(), leaf),
                    walkKernel.arg("contenders"),
                    ValueRange{site.batch, site.kvHead, site.query, pos});
              });
        } else {
          const QueryScratch &scratch = *w.scratch;
          WarpScorer summaries = warpScorer(query, walkKernel.arg("queries"),
                                            walkKernel.arg("pyramid"), p, w.lane,
                                            site);
          n = buildWalk(gb, {walkLayout, p.topK}, summaries, bt, scratch);
          // Lanes hold identical results: lane 0 writes them.
          Value zero = indexConst(gb, 0);
          Value writes =
              arith::SelectOp::create(gb, isLaneZero(gb, w.lane), n, zero);
          buildLoop(gb, zero, writes, {},
                    [&](ImplicitLocOpBuilder &lb, Value a, ValueRange) {
                      Value leaf = memref::LoadOp::create(lb, scratch.cand,
                                                          ValueRange{a});
                      memref::StoreOp::create(
                          lb, leaf, walkKernel.arg("contenders"),
                          ValueRange{site.batch, site.kvHead, site.query, a});
                      return SmallVector<Value>{};
                    });
        }
        buildIfThen(gb, isLaneZero(gb, w.lane), [&](ImplicitLocOpBuilder &sb) {
          memref::StoreOp::create(
              sb, arith::IndexCastOp::create(sb, sb.getI32Type(), n),
              walkKernel.arg("counts"), ValueRange{site.batch, site.kvHead, site.query});
        });
      }, noContenders);
    }
    SmallVector<KernelOperand> operands{{"queries", op.getQueries()},
                                        {"pyramid", op.getPyramid()},
                                        {"offset", op.getQueryOffset()},
                                        {"contenders", op.getContenders()},
                                        {"counts", op.getCounts()}};
    if (packed)
      operands.append({{"cuSeqlensQ", op.getCuSeqlensQ()},
                       {"cuSeqlensK", op.getCuSeqlensK()},
                       {"numKeyRows", op.getNumKeys()}});
    else
      operands.append(keyCountOperand(p, op.getNumKeys()));
    launch(host, walkKernel,
           host.createOrFold<arith::CeilDivUIOp>(
               dimOf(host, op.getQueries(), 2), indexConst(host, kWarpQueries)),
           groupsOf(host, op.getContenders(), p.kvHeads), kQueryThreads,
           operands);
  }
};

/// The stage-2 problem of a bucket or score_tiles op (`queries`, `keys` and
/// `scores` are null for the bucket kernels, which do not read them).
TileProblem tileProblem(Value queries, Value keys, Value scores,
                        Value contenders, Value counts, ValueRange sort,
                        int64_t topK, int64_t candidates, int64_t qTile,
                        int64_t blockSize, float scale, Value cuQueries,
                        Value cuKeys) {
  auto type = [](Value v) { return v ? bufferType(v) : MemRefType(); };
  ArrayRef<int64_t> perKv = bufferType(sort[0]).getShape();
  int64_t groupSize = 0, headDim = 0;
  if (queries) {
    groupSize = bufferType(queries).getShape()[1] / perKv[1];
    headDim = bufferType(queries).getShape()[3];
  }
  SortBuffers s{type(sort[0]), type(sort[1]), type(sort[2]), type(sort[3]),
                type(sort[4]), type(sort[5]), type(sort[6]), type(sort[7])};
  return TileProblem{perKv[1],      groupSize,        headDim,
                     topK,          candidates,       qTile,
                     blockSize,     scale,            type(queries),
                     type(keys),    type(contenders), type(counts),
                     type(scores),  s,                type(cuQueries),
                     type(cuKeys)};
}

/// The cu_seqlens launch operands of a packed stage-2 op (none otherwise).
SmallVector<KernelOperand> cuSeqlensOperands(Value cuQueries, Value cuKeys) {
  if (!cuQueries)
    return {};
  return {{"cuSeqlensQ", cuQueries}, {"cuSeqlensK", cuKeys}};
}

struct BucketToGPU : KernelOpPattern<BucketKernelOp> {
  using KernelOpPattern::KernelOpPattern;
  void lower(BucketKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    SmallVector<Value> sort(op.getDpsInits());
    int64_t candidates = bufferType(op.getContenders()).getShape()[3];
    TileProblem p = tileProblem(Value(), Value(), Value(), op.getContenders(),
                                op.getCounts(), sort, op.getTopk(), candidates,
                                op.getQTile(), op.getBlockSize(), 0.0f,
                                op.getCuSeqlensQ(), op.getCuSeqlensK());
    BucketKernels kernels = buildBucketKernels(rewriter, op, p);
    launchBucketKernels(host, kernels, p,
                        groupsOf(host, op.getCounts(), p.kvHeads),
                        dimOf(host, op.getCounts(), 2), op.getQueryOffset(),
                        op.getContenders(), op.getCounts(), sort,
                        cuSeqlensOperands(op.getCuSeqlensQ(),
                                          op.getCuSeqlensK()));
  }
};

struct ScoreTilesToGPU : KernelOpPattern<ScoreTilesKernelOp> {
  using KernelOpPattern::KernelOpPattern;
  void lower(ScoreTilesKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    // Only the types of the buffers the scoring kernel reads matter here.
    SmallVector<Value> sort{op.getLeafCount(), op.getLeafStart(),
                            op.getLeafStart(), op.getTileLeaf(),
                            op.getTileFirst(), op.getNumTiles(),
                            op.getSortedPairs(), op.getLeafStart()};
    int64_t candidates = bufferType(op.getScores()).getShape()[3];
    TileProblem p = tileProblem(op.getQueries(), op.getKeys(), op.getScores(),
                                Value(), Value(), sort, op.getTopk(),
                                candidates, op.getQTile(), op.getBlockSize(),
                                op.getScale().convertToFloat(),
                                op.getCuSeqlensQ(), op.getCuSeqlensK());
    ScoreKernel kernel = buildScoreKernel(rewriter, op, p);
    SmallVector<KernelOperand> operands{
        {"queries", op.getQueries()},
        {"keys", op.getKeys()},
        {"offset", op.getQueryOffset()},
        {"leafCount", op.getLeafCount()},
        {"leafStart", op.getLeafStart()},
        {"tileLeaf", op.getTileLeaf()},
        {"tileFirst", op.getTileFirst()},
        {"numTiles", op.getNumTiles()},
        {"sortedPairs", op.getSortedPairs()},
        {"scores", op.getScores()}};
    operands.append(cuSeqlensOperands(op.getCuSeqlensQ(), op.getCuSeqlensK()));
    launchScoreKernel(host, kernel, groupsOf(host, op.getScores(), p.kvHeads),
                      dimOf(host, op.getTileLeaf(), 2), operands);
  }
};

/// Stage 3: forced blocks + best scored contenders.
struct SelectFinalToGPU : KernelOpPattern<SelectFinalKernelOp> {
  using KernelOpPattern::KernelOpPattern;
  void lower(SelectFinalKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    int64_t kvHeads = bufferType(op.getCounts()).getShape()[1];
    Problem p{kvHeads, 0, 0, int64_t(op.getTopk()), 0,
              int64_t(op.getBlockSize()), 0.0f, MemRefType(),
              getConstantIntValue(op.getNumKeys())};
    Type index = rewriter.getIndexType(), i32 = rewriter.getI32Type();
    Kernel finalKernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      SmallVector<KernelParam> finalParams{
          {"offset", index},
          {"contenders", bufferType(op.getContenders())},
          {"counts", bufferType(op.getCounts())},
          {"scores", bufferType(op.getScores())},
          {"selection", bufferType(op.getSelection())}};
      const bool packed = bool(op.getCuSeqlensQ());
      if (packed)
        finalParams.append({{"cuSeqlensQ", bufferType(op.getCuSeqlensQ())},
                            {"cuSeqlensK", bufferType(op.getCuSeqlensK())},
                            {"numKeyRows", index}});
      else
        finalParams.append(keyCountParam(p, index));
      finalKernel =
          createKernel(rewriter, op, "select_final", finalParams, {},
                       {privateType(rewriter.getContext(), {p.topK}, i32)});
      ImplicitLocOpBuilder fb(op.getLoc(), rewriter);
      SmallVector<Value> fat =
          queryThread(fb, p, dimOf(fb, finalKernel.arg("counts"), 2));
      Value selection = finalKernel.arg("selection");
      auto select = [&](ImplicitLocOpBuilder &gb, Value bt) {
        Value n = arith::IndexCastOp::create(
            gb, gb.getIndexType(),
            memref::LoadOp::create(gb, finalKernel.arg("counts"),
                                   ValueRange{fat[0], fat[1], fat[2]}));
        buildFinalSelection(
            gb, p.topK, bt, n,
            [&](ImplicitLocOpBuilder &lb, Value a) -> Value {
              return arith::IndexCastOp::create(
                  lb, lb.getIndexType(),
                  memref::LoadOp::create(lb, finalKernel.arg("contenders"),
                                         ValueRange{fat[0], fat[1], fat[2], a}));
            },
            [&](ImplicitLocOpBuilder &lb, Value a) -> Value {
              return memref::LoadOp::create(lb, finalKernel.arg("scores"),
                                            ValueRange{fat[0], fat[1], fat[2], a});
            },
            finalKernel.func().getPrivateAttributions()[0],
            [&](ImplicitLocOpBuilder &lb, Value pos, Value value) {
              memref::StoreOp::create(
                  lb, arith::IndexCastOp::create(lb, lb.getI32Type(), value),
                  selection, ValueRange{fat[0], fat[1], fat[2], pos});
            });
      };
      if (!packed) {
        // Only b_t is needed here: M_1, not the whole layout.
        Value finalLeaves =
            p.dynamicKeys()
                ? fb.createOrFold<arith::CeilDivUIOp>(
                      finalKernel.arg("numKeys"), indexConst(fb, p.blockSize))
                : indexConst(fb, ceilDiv(*p.numKeys, p.blockSize));
        guarded(fb, fat[3], [&](ImplicitLocOpBuilder &gb) {
          Value t = arith::AddIOp::create(gb, finalKernel.arg("offset"), fat[2]);
          select(gb, leafOfPosition(gb, p.blockSize, finalLeaves, t));
        });
      } else {
        guarded(fb, fat[3], [&](ImplicitLocOpBuilder &gb) {
          QueryRowSequence seq = sequenceOfQueryRow(
              gb, finalKernel.arg("cuSeqlensQ"), finalKernel.arg("cuSeqlensK"),
              dimOf(gb, finalKernel.arg("counts"), 2),
              finalKernel.arg("numKeyRows"), fat[2]);
          auto ifOp = scf::IfOp::create(gb, seq.valid, /*withElseRegion=*/true);
          OpBuilder::InsertionGuard g(gb);
          gb.setInsertionPointToStart(ifOp.thenBlock());
          Value leaves = arith::CeilDivUIOp::create(
              gb, seq.keys.count, indexConst(gb, p.blockSize));
          select(gb, leafOfPosition(gb, p.blockSize, leaves, seq.position));
          gb.setInsertionPointToStart(ifOp.elseBlock());
          storeInvalidRow(gb, selection, p.topK, {fat[0], fat[1], fat[2]});
        });
      }
    }
    SmallVector<KernelOperand> operands{{"offset", op.getQueryOffset()},
                                        {"contenders", op.getContenders()},
                                        {"counts", op.getCounts()},
                                        {"scores", op.getScores()},
                                        {"selection", op.getSelection()}};
    if (op.getCuSeqlensQ())
      operands.append({{"cuSeqlensQ", op.getCuSeqlensQ()},
                       {"cuSeqlensK", op.getCuSeqlensK()},
                       {"numKeyRows", op.getNumKeys()}});
    else
      operands.append(keyCountOperand(p, op.getNumKeys()));
    launch(host, finalKernel,
           host.createOrFold<arith::CeilDivUIOp>(
               dimOf(host, op.getCounts(), 2), indexConst(host, kQueryThreads)),
           groupsOf(host, op.getCounts(), p.kvHeads), kQueryThreads, operands);
  }
};

} // namespace

void mlir::pisa::populateSelectionKernelsToGPUPatterns(
    RewritePatternSet &patterns) {
  patterns.add<SelectSingleStageToGPU, SelectSingleStageVarlenToGPU,
               FragmentPlanesToGPU, WalkToGPU,
               BucketToGPU, ScoreTilesToGPU, SelectFinalToGPU>(
      patterns.getContext());
}
