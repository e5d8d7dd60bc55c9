//===- TwoStageToGPU.cpp - the two-stage selection kernels ----------------===//
//
// One pattern per kernel-level op of the two-stage schedule, each building
// its gpu.func(s) and launching them where the op was: (fragment_planes)
// the pyramid as bf16 mma fragments; (walk) one warp per (query, KV head)
// walks levels L..2 and writes its leaf contenders (at most g*K);
// (bucket) a counting sort by leaf groups the (query, contender) pairs
// that need scoring: histogram, scan (which also cuts every leaf's group
// into tiles of at most Q_tile queries), scatter; (score_tiles) one block
// per tile loads the leaf's d x C key tile into shared memory once and
// scores the tile's Q_tile x G heads against it; (select_final) one
// thread per (query, KV head) keeps the forced blocks and the best
// contenders. With cu_seqlens, on a packed batch (docs/gpu.md, "Varlen").
//
//===----------------------------------------------------------------------===//

#include "Selection/PackedSequences.h"
#include "Selection/QueryKernels.h"
#include "Selection/TileScoring.h"

#include "../Common/LoopBuilders.h"

#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

namespace {

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

/// One query warp of stage 1: the walk down to its leaf contenders, written
/// to `contenders` with their number to `counts`.
static void walkQueryWarp(ImplicitLocOpBuilder &gb, const Kernel &walkKernel,
                          const Problem &p, const WarpSite &w,
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
    WarpScorer summaries =
        warpScorer(query, walkKernel.arg("queries"), walkKernel.arg("pyramid"),
                   p, w.lane, site);
    n = buildWalk(gb, {walkLayout, p.topK}, summaries, bt, scratch);
    // Lanes hold identical results: lane 0 writes them.
    Value zero = indexConst(gb, 0);
    Value writes = arith::SelectOp::create(gb, isLaneZero(gb, w.lane), n, zero);
    buildLoop(gb, zero, writes, {},
              [&](ImplicitLocOpBuilder &lb, Value a, ValueRange) {
                Value leaf =
                    memref::LoadOp::create(lb, scratch.cand, ValueRange{a});
                memref::StoreOp::create(
                    lb, leaf, walkKernel.arg("contenders"),
                    ValueRange{site.batch, site.kvHead, site.query, a});
                return SmallVector<Value>{};
              });
  }
  buildIfThen(gb, isLaneZero(gb, w.lane), [&](ImplicitLocOpBuilder &sb) {
    memref::StoreOp::create(sb,
                            arith::IndexCastOp::create(sb, sb.getI32Type(), n),
                            walkKernel.arg("counts"),
                            ValueRange{site.batch, site.kvHead, site.query});
  });
}

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
      walkParams.append(
          keyParams(p, index, op.getCuSeqlensQ(), op.getCuSeqlensK()));
      walkKernel =
          createKernel(rewriter, op, "select_stage1_walk", walkParams, {},
                       mmaWalk ? SmallVector<Type>{}
                               : scratchTypes(rewriter.getContext(), p));
      applyOccupancyHint(walkKernel.func(), getKernelConfig(op));
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      Value numKeys = packed ? Value() : keyCount(b, walkKernel, p);
      std::optional<LevelLayout> batchLayout;
      if (!packed)
        batchLayout.emplace(b, numKeys, p.blockSize, p.fanout);
      auto sequenceOf = [&](ImplicitLocOpBuilder &sb, Value batch, Value row) {
        if (!packed)
          return batchedSequence(sb, batch, row, walkKernel.arg("offset"),
                                 numKeys);
        return packedSequence(
            sb, walkKernel.arg("cuSeqlensQ"), walkKernel.arg("cuSeqlensK"),
            dimOf(sb, walkKernel.arg("queries"), 2),
            walkKernel.arg("numKeyRows"), batch, row, p.blockSize);
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
      forEachQueryWarp(
          b, walkKernel, p, walkKernel.arg("queries"), mmaWalk,
          batchLayout ? &*batchLayout : nullptr, sequenceOf,
          [&](ImplicitLocOpBuilder &gb, const WarpSite &w,
              const LevelLayout &walkLayout) {
            walkQueryWarp(gb, walkKernel, p, w, walkLayout);
          },
          noContenders);
    }
    SmallVector<KernelOperand> operands{{"queries", op.getQueries()},
                                        {"pyramid", op.getPyramid()},
                                        {"offset", op.getQueryOffset()},
                                        {"contenders", op.getContenders()},
                                        {"counts", op.getCounts()}};
    operands.append(keyOperands(p, op.getNumKeys(), op.getCuSeqlensQ(),
                                op.getCuSeqlensK()));
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
  return TileProblem{
      perKv[1],          groupSize,  headDim,          topK,
      candidates,        qTile,      blockSize,        scale,
      type(queries),     type(keys), type(contenders), type(counts),
      type(scores),      s,          type(cuQueries),  type(cuKeys),
      KernelConfigAttr()};
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
    launchBucketKernels(
        host, kernels, p, groupsOf(host, op.getCounts(), p.kvHeads),
        dimOf(host, op.getCounts(), 2), op.getQueryOffset(), op.getContenders(),
        op.getCounts(), sort,
        cuSeqlensOperands(op.getCuSeqlensQ(), op.getCuSeqlensK()));
  }
};

struct ScoreTilesToGPU : KernelOpPattern<ScoreTilesKernelOp> {
  using KernelOpPattern::KernelOpPattern;
  void lower(ScoreTilesKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    // Only the types of the buffers the scoring kernel reads matter here.
    SmallVector<Value> sort{op.getLeafCount(),   op.getLeafStart(),
                            op.getLeafStart(),   op.getTileLeaf(),
                            op.getTileFirst(),   op.getNumTiles(),
                            op.getSortedPairs(), op.getLeafStart()};
    int64_t candidates = bufferType(op.getScores()).getShape()[3];
    TileProblem p = tileProblem(
        op.getQueries(), op.getKeys(), op.getScores(), Value(), Value(), sort,
        op.getTopk(), candidates, op.getQTile(), op.getBlockSize(),
        op.getScale().convertToFloat(), op.getCuSeqlensQ(), op.getCuSeqlensK());
    p.config = getKernelConfig(op);
    Kernel kernel = buildScoreKernel(rewriter, op, p);
    SmallVector<KernelOperand> operands{
        {"queries", op.getQueries()},         {"keys", op.getKeys()},
        {"offset", op.getQueryOffset()},      {"leafCount", op.getLeafCount()},
        {"leafStart", op.getLeafStart()},     {"tileLeaf", op.getTileLeaf()},
        {"tileFirst", op.getTileFirst()},     {"numTiles", op.getNumTiles()},
        {"sortedPairs", op.getSortedPairs()}, {"scores", op.getScores()}};
    operands.append(cuSeqlensOperands(op.getCuSeqlensQ(), op.getCuSeqlensK()));
    launchScoreKernel(host, kernel, p.config,
                      groupsOf(host, op.getScores(), p.kvHeads),
                      dimOf(host, op.getTileLeaf(), 2), operands);
  }
};

/// The contenders a select_final thread holds in registers (their static
/// bound g*K when it is at most kRegisterContenders), else 0: the kernel
/// then ranks them in place (buildFinalSelection, a private kept list).
static int64_t registerContenders(SelectFinalKernelOp op) {
  int64_t capacity = bufferType(op.getContenders()).getShape()[3];
  return ShapedType::isDynamic(capacity) || capacity > kRegisterContenders
             ? 0
             : capacity;
}

/// Stage 3 for the query row at `fat` (batch, head, query), whose leaf is
/// bt: the forced blocks and the best of its scored contenders, written to
/// `selection`; `capacity` from registerContenders.
static void selectFromContenders(ImplicitLocOpBuilder &gb,
                                 const Kernel &finalKernel, const Problem &p,
                                 ArrayRef<Value> fat, Value bt,
                                 int64_t capacity) {
  Value selection = finalKernel.arg("selection");
  Value n = arith::IndexCastOp::create(
      gb, gb.getIndexType(),
      memref::LoadOp::create(gb, finalKernel.arg("counts"),
                             ValueRange{fat[0], fat[1], fat[2]}));
  auto loadCand = [&](ImplicitLocOpBuilder &lb, Value a) -> Value {
    return arith::IndexCastOp::create(
        lb, lb.getIndexType(),
        memref::LoadOp::create(lb, finalKernel.arg("contenders"),
                               ValueRange{fat[0], fat[1], fat[2], a}));
  };
  auto loadScore = [&](ImplicitLocOpBuilder &lb, Value a) -> Value {
    return memref::LoadOp::create(lb, finalKernel.arg("scores"),
                                  ValueRange{fat[0], fat[1], fat[2], a});
  };
  auto store = [&](ImplicitLocOpBuilder &lb, Value pos, Value value) {
    memref::StoreOp::create(
        lb, arith::IndexCastOp::create(lb, lb.getI32Type(), value), selection,
        ValueRange{fat[0], fat[1], fat[2], pos});
  };
  if (capacity)
    return buildFinalSelectionInRegisters(gb, p.topK, capacity, bt, n, loadCand,
                                          loadScore, store);
  buildFinalSelection(gb, p.topK, bt, n, loadCand, loadScore,
                      finalKernel.func().getPrivateAttributions()[0], store);
}

/// Stage 3: forced blocks + best scored contenders.
struct SelectFinalToGPU : KernelOpPattern<SelectFinalKernelOp> {
  using KernelOpPattern::KernelOpPattern;
  void lower(SelectFinalKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    int64_t kvHeads = bufferType(op.getCounts()).getShape()[1];
    Problem p{kvHeads,
              0,
              0,
              int64_t(op.getTopk()),
              0,
              int64_t(op.getBlockSize()),
              0.0f,
              MemRefType(),
              getConstantIntValue(op.getNumKeys()),
              KernelConfigAttr()};
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
      finalParams.append(
          keyParams(p, index, op.getCuSeqlensQ(), op.getCuSeqlensK()));
      const int64_t capacity = registerContenders(op);
      SmallVector<Type> privates;
      if (!capacity)
        privates.push_back(privateType(rewriter.getContext(), {p.topK}, i32));
      finalKernel =
          createKernel(rewriter, op, "select_final", finalParams, {}, privates);
      ImplicitLocOpBuilder fb(op.getLoc(), rewriter);
      SmallVector<Value> fat =
          queryThread(fb, p, dimOf(fb, finalKernel.arg("counts"), 2));
      Value selection = finalKernel.arg("selection");
      auto select = [&](ImplicitLocOpBuilder &gb, Value bt) {
        selectFromContenders(gb, finalKernel, p, fat, bt, capacity);
      };
      if (!packed) {
        // Only b_t is needed here: M_1, not the whole layout.
        Value finalLeaves =
            p.dynamicKeys()
                ? fb.createOrFold<arith::CeilDivUIOp>(
                      finalKernel.arg("numKeys"), indexConst(fb, p.blockSize))
                : indexConst(fb, ceilDiv(*p.numKeys, p.blockSize));
        guarded(fb, fat[3], [&](ImplicitLocOpBuilder &gb) {
          Value t =
              arith::AddIOp::create(gb, finalKernel.arg("offset"), fat[2]);
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
    operands.append(keyOperands(p, op.getNumKeys(), op.getCuSeqlensQ(),
                                op.getCuSeqlensK()));
    launch(host, finalKernel,
           host.createOrFold<arith::CeilDivUIOp>(
               dimOf(host, op.getCounts(), 2), indexConst(host, kQueryThreads)),
           groupsOf(host, op.getCounts(), p.kvHeads), kQueryThreads, operands);
  }
};

} // namespace

void mlir::pisa::populateSelectionKernelsToGPUPatterns(
    RewritePatternSet &patterns) {
  addSingleStagePatterns(patterns);
  addLseScorePatterns(patterns);
  patterns.add<FragmentPlanesToGPU, WalkToGPU, BucketToGPU, ScoreTilesToGPU,
               SelectFinalToGPU>(patterns.getContext());
}
