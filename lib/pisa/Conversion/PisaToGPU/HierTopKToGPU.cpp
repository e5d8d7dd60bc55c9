//===- HierTopKToGPU.cpp - hier_topk to the kernels of its schedule -------===//
//
// single_stage: one thread per (query, KV head) runs the whole selection,
// from the root to the leaves, in one kernel.
//
// two_stage: (1) one thread per (query, KV head) walks levels L..2 and writes
// its leaf contenders (at most g*K); (2) a counting sort by leaf groups the
// (query, contender) pairs that need scoring: histogram, scan (which also
// cuts every leaf's group into tiles of at most Q_tile queries), scatter;
// (3) one block per tile loads the leaf's d x C key tile into shared memory
// once and scores the tile's Q_tile x G heads against it; (4) one thread
// per (query, KV head) keeps the forced blocks and the best contenders.
//
//===----------------------------------------------------------------------===//

#include "DeviceSelection.h"
#include "KernelBuilder.h"
#include "TileScoring.h"
#include "WarpWalkMMA.h"

#include "../Common/LoopBuilders.h"

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

/// Shapes and types of one hier_topk, shared by its kernels. B, N and Nq
/// may be dynamic (ShapedType::kDynamic in the types): kernels read Nq from
/// their buffers and N from "numKeys" (or the keys' size).
struct Problem {
  int64_t kvHeads, groupSize, headDim;
  int64_t topK, fanout, blockSize;
  float scale;
  MemRefType queries, keys, pyramid, selection;
  int64_t candidates() const { return fanout * topK; }
  int64_t staticKeys() const { return keys.getShape()[2]; }
  bool dynamicKeys() const { return ShapedType::isDynamic(staticKeys()); }
};

/// a * b, dynamic when either is.
int64_t staticProduct(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) ? ShapedType::kDynamic
                                                                : a * b;
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
  return p.dynamicKeys() ? kernel.arg("numKeys")
                         : indexConst(b, p.staticKeys());
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

/// One query's warp inside a walk kernel: where it is, its private scratch
/// and its query rows (in registers when they fit).
struct WarpSite {
  QuerySite site;
  Value lane, bt;
  std::optional<QueryScratch> scratch;
  std::optional<WarpQuery> query;
  /// A fragments when the walk's levels score on tensor cores.
  std::optional<MmaWalkQuery> mmaQuery;
};

/// Emits the prologue shared by the walk kernels (warp coordinates, the
/// in-range guard, position, b_t, the query: A fragments when `mmaLevels`
/// and the shapes let the levels score on tensor cores, else f32 rows in
/// registers when they fit) and `body` under the guard.
void forEachQueryWarp(ImplicitLocOpBuilder &b, const Kernel &kernel,
                      const Problem &p, const LevelLayout &layout,
                      Value queries, Value offset, bool mmaLevels,
                      llvm::function_ref<void(ImplicitLocOpBuilder &,
                                              const WarpSite &)>
                          body) {
  SmallVector<Value> at = queryWarp(b, p, dimOf(b, queries, 2));
  guarded(b, at[3], [&](ImplicitLocOpBuilder &gb) {
    Value t = arith::AddIOp::create(gb, offset, at[2]);
    WarpSite w{{at[0], at[1], at[2], t}, at[4],
               leafOfPosition(gb, layout, t), scratchOf(kernel),
               std::nullopt, std::nullopt};
    if (mmaLevels &&
        canWalkWithMma(p.queries.getElementType(), p.groupSize, p.headDim,
                       p.fanout, p.candidates()))
      w.mmaQuery = loadMmaWalkQuery(gb, queries, w.site, p.headDim, w.lane);
    else
      w.query = loadWarpQuery(gb, queries, w.site, p.groupSize, p.headDim,
                              w.lane);
    body(gb, w);
  });
}

/// The host-side buffers of one hier_topk: its operands' memref views and
/// the selection it writes.
struct HostBuffers {
  Value queries, keys, pyramid, offset, selection;
};

/// Sizes on the host, constants where static.
struct HostSizes {
  Value batch, numQueries;
  LevelLayout layout; ///< of N: layout.numKeys()
  Value groups(ImplicitLocOpBuilder &b, const Problem &p) const {
    return b.createOrFold<arith::MulIOp>(batch, indexConst(b, p.kvHeads));
  }
};

/// What the verifier could not check because a size is dynamic, and the GPU
/// limits on those sizes (gpuLimitViolation checks the static ones): host
/// assertions that pisa-compile turns into a call's error.
void requireSizes(ImplicitLocOpBuilder &b, HierTopKOp op, const Problem &p,
                  const HostSizes &sizes, Value queries, Value keys,
                  Value pyramid, Value offset) {
  auto dynamic = [](Value v, int64_t dim) {
    return cast<MemRefType>(v.getType()).isDynamicDim(dim);
  };
  auto require = [&](arith::CmpIPredicate pred, Value lhs, Value rhs,
                     const Twine &what) {
    requireAtRuntime(b, cmp(b, pred, lhs, rhs), "pisa.hier_topk: " + what);
  };
  using P = arith::CmpIPredicate;
  if (dynamic(queries, 0) || dynamic(keys, 0))
    require(P::eq, dimOf(b, keys, 0), sizes.batch,
            "the keys' batch differs from the queries'");
  if (dynamic(pyramid, 0) || dynamic(queries, 0))
    require(P::eq, dimOf(b, pyramid, 0), sizes.batch,
            "the pyramid's batch differs from the queries'");
  if (dynamic(pyramid, 2) || dynamic(keys, 2))
    require(P::eq, dimOf(b, pyramid, 2), sizes.layout.totalRows(),
            "the pyramid's rows are not the layout of the keys' N");
  if (!dynamic(queries, 2) && !dynamic(keys, 2) && !dynamic(queries, 0))
    return;
  // The query offset is bounded by the manifest for static shapes.
  require(P::ule, sizes.numQueries, sizes.layout.numKeys(),
          "more queries than keys (Nq > N)");
  require(P::ule, offset,
          arith::SubIOp::create(b, sizes.layout.numKeys(),
                                arith::MinUIOp::create(b, sizes.numQueries,
                                                       sizes.layout.numKeys())),
          "query_offset + Nq exceeds N");
  require(P::ule, sizes.groups(b, p), indexConst(b, kMaxGPUGroups),
          "B * Hkv is above the GPU limit of " +
              std::to_string(kMaxGPUGroups) + " (grid y)");
  require(P::ule,
          arith::MulIOp::create(b, sizes.numQueries,
                                indexConst(b, p.candidates())),
          indexConst(b, kMaxGPUPairs),
          "Nq * g * K is above the GPU limit of " +
              std::to_string(kMaxGPUPairs) + " (32-bit stage-2 pair indices)");
  require(P::ule, sizes.layout.numKeys(), indexConst(b, kMaxGPUKeys),
          "N is above the GPU limit of " + std::to_string(kMaxGPUKeys) +
              " (32-bit leaf indices)");
}

struct HierTopKToGPU : OpRewritePattern<HierTopKOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(HierTopKOp op,
                                PatternRewriter &rewriter) const override {
    ScheduleAttr schedule = op.getScheduleAttr();
    if (!schedule)
      return op.emitOpError("has no #pisa.schedule: run --pisa-select-schedule "
                            "before --convert-pisa-to-gpu");
    if (std::optional<std::string> why = gpuLimitViolation(op))
      return rewriter.notifyMatchFailure(op, *why);
    ArrayRef<int64_t> q = op.getQueries().getType().getShape();
    ArrayRef<int64_t> k = op.getKeys().getType().getShape();
    Problem p{k[1],
              q[1] / k[1],
              q[3],
              int64_t(op.getTopk()),
              int64_t(op.getBranching()),
              int64_t(op.getBlockSize()),
              op.getScaleOrDefault(),
              globalType(q, op.getQueries().getType().getElementType()),
              globalType(k, op.getKeys().getType().getElementType()),
              globalType(op.getPyramid().getType().getShape(),
                         rewriter.getF32Type()),
              globalType(op.getSelection().getType().getShape(),
                         rewriter.getI32Type())};

    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value queries = toBuffer(b, op.getQueries());
    Value keys = toBuffer(b, op.getKeys());
    Value pyramid = toBuffer(b, op.getPyramid());
    Value offset = op.getQueryOffset();
    HostSizes sizes{dimOf(b, queries, 0), dimOf(b, queries, 2),
                    LevelLayout(b, dimOf(b, keys, 2), p.blockSize, p.fanout)};
    requireSizes(b, op, p, sizes, queries, keys, pyramid, offset);
    Value selection = allocDevice(
        b, p.selection,
        {sizes.batch, indexConst(b, p.kvHeads), sizes.numQueries,
         indexConst(b, p.topK)},
        /*isResult=*/true);

    HostBuffers buffers{queries, keys, pyramid, offset, selection};
    if (schedule.getKind() == ScheduleKind::SingleStage) {
      lowerSingleStage(rewriter, op, b, p, sizes, buffers);
    } else {
      if (failed(lowerTwoStage(rewriter, op, b, p, sizes, schedule.getQTile(),
                               buffers)))
        return failure();
    }
    Value result = bufferization::ToTensorOp::create(
        b, op.getSelection().getType(), selection, b.getUnitAttr());
    rewriter.replaceOp(op, result);
    return success();
  }

private:
  /// The walk, the leaf scoring from raw keys and the final selection, in
  /// one kernel.
  void lowerSingleStage(PatternRewriter &rewriter, HierTopKOp op,
                        ImplicitLocOpBuilder &host, const Problem &p,
                        const HostSizes &sizes,
                        const HostBuffers &args) const {
    Kernel kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      kernel = createKernel(rewriter, op, "select_single_stage",
                            {{"queries", p.queries},
                             {"keys", p.keys},
                             {"pyramid", p.pyramid},
                             {"offset", rewriter.getIndexType()},
                             {"selection", p.selection}},
                            {}, scratchTypes(rewriter.getContext(), p));
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      Value numKeys = dimOf(b, kernel.arg("keys"), 2);
      LevelLayout layout(b, numKeys, p.blockSize, p.fanout);
      forEachQueryWarp(b, kernel, p, layout, kernel.arg("queries"),
                       kernel.arg("offset"), /*mmaLevels=*/false,
                       [&](ImplicitLocOpBuilder &gb, const WarpSite &w) {
        const QuerySite &site = w.site;
        const QueryScratch &scratch = *w.scratch;
        Value bt = w.bt;
        const std::optional<WarpQuery> &query = w.query;
        WarpScorer summaries = warpScorer(query, kernel.arg("queries"),
                                          kernel.arg("pyramid"), p, w.lane, site);
        WarpScorer rawKeys = warpScorer(query, kernel.arg("queries"),
                                        kernel.arg("keys"), p, w.lane, site);
        // The SIMT walk here: with the tensor-core level scorer this kernel
        // also keeps the f32 query rows for the leaves, and measured 12%
        // slower at 256K (docs/performance.md, v9).
        Value numContenders =
            buildWalk(gb, {layout, p.topK}, summaries, bt, scratch);
        // Score the contenders from the raw keys when they must compete.
        Value zero = indexConst(gb, 0);
        Value ranked = arith::CmpIOp::create(
            gb, arith::CmpIPredicate::ugt, numContenders,
            contenderSlots(gb, p.topK, bt));
        ChildLevel keyLevel{zero, numKeys, indexConst(gb, p.blockSize),
                            indexConst(gb, 1)};
        auto ifOp = scf::IfOp::create(gb, ranked, false);
        {
          OpBuilder::InsertionGuard g(gb);
          gb.setInsertionPointToStart(ifOp.thenBlock());
          buildLoop(gb, zero, numContenders, {},
                    [&](ImplicitLocOpBuilder &lb, Value a, ValueRange) {
                      Value node = arith::IndexCastOp::create(
                          lb, lb.getIndexType(),
                          memref::LoadOp::create(lb, scratch.cand, ValueRange{a}));
                      Value u = rawKeys(lb, keyLevel, node);
                      memref::StoreOp::create(lb, u, scratch.scores, ValueRange{a});
                      return SmallVector<Value>{};
                    });
        }
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
              buildIfThen(lb, isLaneZero(lb, w.lane),
                          [&](ImplicitLocOpBuilder &sb) {
                memref::StoreOp::create(
                    sb, arith::IndexCastOp::create(sb, sb.getI32Type(), value),
                    kernel.arg("selection"), ValueRange{site.batch, site.kvHead, site.query, pos});
              });
            });
      });
    }
    launch(host, kernel,
           host.createOrFold<arith::CeilDivUIOp>(sizes.numQueries,
                                      indexConst(host, kWarpQueries)),
           sizes.groups(host, p), kQueryThreads,
           {{"queries", args.queries},
            {"keys", args.keys},
            {"pyramid", args.pyramid},
            {"offset", args.offset},
            {"selection", args.selection}});
  }

  LogicalResult lowerTwoStage(PatternRewriter &rewriter, HierTopKOp op,
                              ImplicitLocOpBuilder &host, const Problem &p,
                              const HostSizes &sizes, int64_t qTile,
                              const HostBuffers &args) const {
    MLIRContext *ctx = rewriter.getContext();
    Type i32 = rewriter.getI32Type(), f32 = rewriter.getF32Type();
    Type index = rewriter.getIndexType();
    const int64_t gk = p.candidates();
    // Static sizes where they are known (the types then match the static
    // lowering), dynamic otherwise.
    const int64_t batch = p.queries.getShape()[0];
    const int64_t numQueries = p.queries.getShape()[2];
    const std::optional<PyramidLayout> &fixed = sizes.layout.fixed();
    const int64_t leaves = fixed ? fixed->numLeaves() : ShapedType::kDynamic;
    const int64_t pairs = staticProduct(numQueries, gk);
    const int64_t maxTileCount =
        ShapedType::isDynamic(pairs) || !fixed ? ShapedType::kDynamic
                                               : ceilDiv(pairs, qTile) + leaves;

    MemRefType contendersType =
        globalType({batch, p.kvHeads, numQueries, gk}, i32);
    MemRefType countType = globalType({batch, p.kvHeads, numQueries}, i32);
    MemRefType scoresType = globalType({batch, p.kvHeads, numQueries, gk}, f32);
    SortBuffers sortTypes{globalType({batch, p.kvHeads, leaves}, i32),
                          globalType({batch, p.kvHeads, leaves}, i32),
                          globalType({batch, p.kvHeads, leaves}, i32),
                          globalType({batch, p.kvHeads, maxTileCount}, i32),
                          globalType({batch, p.kvHeads, maxTileCount}, i32),
                          globalType({batch, p.kvHeads}, i32),
                          globalType({batch, p.kvHeads, pairs}, i32),
                          globalType({batch, p.kvHeads, leaves}, i32)};

    // Stage 1: the walk down to the leaf contenders. On tensor cores it
    // reads the pyramid as bf16 fragment planes written just before it.
    const bool mmaWalk =
        canWalkWithMma(p.queries.getElementType(), p.groupSize, p.headDim,
                       p.fanout, p.candidates());
    MemRefType walkPyramid =
        mmaWalk ? fragmentPlanesType(p.pyramid) : p.pyramid;
    Kernel walkKernel, finalKernel, planesKernel;
    if (mmaWalk)
      planesKernel = buildFragmentPlanesKernel(rewriter, op, p.pyramid);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      SmallVector<KernelParam> walkParams{{"queries", p.queries},
                                          {"pyramid", walkPyramid},
                                          {"offset", index},
                                          {"contenders", contendersType},
                                          {"counts", countType}};
      walkParams.append(keyCountParam(p, index));
      walkKernel = createKernel(
          rewriter, op, "select_stage1_walk", walkParams, {},
          mmaWalk ? SmallVector<Type>{} : scratchTypes(ctx, p));
      if (mmaWalk) {
        // The tensor-core walk is latency-bound (ncu: L1 scoreboard stalls
        // at 5 blocks per SM with 106 registers); ptxas fits 8 blocks (64
        // registers) without spills for g*K <= 16, 6 (80) for 32.
        setOccupancyHint(walkKernel.func(), kQueryThreads,
                         p.candidates() <= 16 ? 8 : 6);
      }
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      LevelLayout walkLayout(b, keyCount(b, walkKernel, p), p.blockSize,
                             p.fanout);
      forEachQueryWarp(b, walkKernel, p, walkLayout, walkKernel.arg("queries"),
                       walkKernel.arg("offset"), /*mmaLevels=*/true,
                       [&](ImplicitLocOpBuilder &gb, const WarpSite &w) {
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
      });

      // Stage 4: forced blocks + best scored contenders.
      SmallVector<KernelParam> finalParams{{"offset", index},
                                           {"contenders", contendersType},
                                           {"counts", countType},
                                           {"scores", scoresType},
                                           {"selection", p.selection}};
      finalParams.append(keyCountParam(p, index));
      finalKernel = createKernel(rewriter, op, "select_final", finalParams, {},
                                 {privateType(ctx, {p.topK}, i32)});
      ImplicitLocOpBuilder fb(op.getLoc(), rewriter);
      // Only b_t is needed here: M_1, not the whole layout.
      Value finalLeaves =
          p.dynamicKeys()
              ? fb.createOrFold<arith::CeilDivUIOp>(
                    finalKernel.arg("numKeys"), indexConst(fb, p.blockSize))
              : indexConst(fb, ceilDiv(p.staticKeys(), p.blockSize));
      SmallVector<Value> fat =
          queryThread(fb, p, dimOf(fb, finalKernel.arg("counts"), 2));
      guarded(fb, fat[3], [&](ImplicitLocOpBuilder &gb) {
        Value t = arith::AddIOp::create(gb, finalKernel.arg("offset"), fat[2]);
        Value bt = leafOfPosition(gb, p.blockSize, finalLeaves, t);
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
                  finalKernel.arg("selection"), ValueRange{fat[0], fat[1], fat[2], pos});
            });
      });
    }

    TileKernels tiles = buildTileKernels(
        rewriter, op,
        TileProblem{p.kvHeads, p.groupSize, p.headDim, p.topK, gk, qTile,
                    p.blockSize, p.scale, p.queries, p.keys, contendersType,
                    countType, scoresType, sortTypes});

    Value queries = args.queries, keys = args.keys, pyramid = args.pyramid;
    Value offset = args.offset, selection = args.selection;
    Value heads = indexConst(host, p.kvHeads), cGk = indexConst(host, gk);
    Value numPairs = host.createOrFold<arith::MulIOp>(sizes.numQueries, cGk);
    Value numLeaves = sizes.layout.numLeaves();
    Value tileBound = maxTiles(host, sizes.numQueries, numLeaves, gk, qTile);
    auto perQuery = [&](MemRefType type) {
      return allocDevice(host, type,
                         {sizes.batch, heads, sizes.numQueries, cGk});
    };
    Value contenders = perQuery(contendersType);
    Value counts = perQuery(countType);
    Value scores = perQuery(scoresType);
    SmallVector<Value> sort;
    SmallVector<Value> lastDims{numLeaves, numLeaves, numLeaves, tileBound,
                                tileBound, Value(),   numPairs,  numLeaves};
    for (auto [t, last] : llvm::zip(sortTypes.all(), lastDims))
      sort.push_back(allocDevice(host, t, {sizes.batch, heads, last}));
    Value groups = sizes.groups(host, p);
    Value queryBlocks = host.createOrFold<arith::CeilDivUIOp>(sizes.numQueries, indexConst(host, kQueryThreads));
    Value warpBlocks = host.createOrFold<arith::CeilDivUIOp>(sizes.numQueries, indexConst(host, kWarpQueries));
    Value walkPyramidBuffer = pyramid;
    if (mmaWalk) {
      walkPyramidBuffer = allocDevice(
          host, walkPyramid,
          {sizes.batch, heads, sizes.layout.totalRows(),
           indexConst(host, 2 * p.headDim)});
      launch(host, planesKernel, fragmentPlanesBlocks(host, pyramid), groups,
             kFragmentPlanesThreads,
             {{"pyramid", pyramid}, {"planes", walkPyramidBuffer}});
    }
    SmallVector<KernelOperand> walkOperands{{"queries", queries},
                                            {"pyramid", walkPyramidBuffer},
                                            {"offset", offset},
                                            {"contenders", contenders},
                                            {"counts", counts}};
    walkOperands.append(keyCountOperand(p, sizes.layout.numKeys()));
    launch(host, walkKernel, warpBlocks, groups, kQueryThreads, walkOperands);
    launchTileKernels(host, tiles, groups, sizes.numQueries, tileBound,
                      queries, keys, offset, contenders, counts, scores, sort);
    SmallVector<KernelOperand> finalOperands{{"offset", offset},
                                             {"contenders", contenders},
                                             {"counts", counts},
                                             {"scores", scores},
                                             {"selection", selection}};
    finalOperands.append(keyCountOperand(p, sizes.layout.numKeys()));
    launch(host, finalKernel, queryBlocks, groups, kQueryThreads,
           finalOperands);
    SmallVector<Value> scratch{contenders, counts, scores};
    scratch.append(sort.begin(), sort.end());
    if (mmaWalk)
      scratch.push_back(walkPyramidBuffer);
    for (Value v : scratch)
      gpu::DeallocOp::create(host, Type(), ValueRange{}, v);
    return success();
  }
};

} // namespace

void mlir::pisa::populateHierTopKToGPUPatterns(RewritePatternSet &patterns) {
  patterns.add<HierTopKToGPU>(patterns.getContext());
}
