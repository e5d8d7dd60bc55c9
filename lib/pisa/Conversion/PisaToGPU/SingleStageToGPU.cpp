//===- SingleStageToGPU.cpp - the single-stage selection kernels ----------===//
//
// select_single_stage (and its varlen form): one warp per (query, KV head)
// runs the whole selection, from the root to the leaves, in one kernel.
//
//===----------------------------------------------------------------------===//

#include "QueryKernels.h"
#include "PackedSequences.h"

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

/// The single-stage body over warps that each find their own sequence
/// (`sequenceOf`) and build its layout: a packed varlen batch or a decode
/// batch of its own lengths. A warp whose sequence breaks a rule writes
/// its row as kInvalidInput (docs/semantics.md, sections 4 and 7).
void buildPerSequenceSingleStage(ImplicitLocOpBuilder &b, const Kernel &kernel,
                                 const Problem &p, WarpSequenceOf sequenceOf) {
  forEachQueryWarp(
      b, kernel, p, kernel.arg("queries"), /*mmaLevels=*/false,
      /*batchLayout=*/nullptr, sequenceOf,
      [&](ImplicitLocOpBuilder &gb, const WarpSite &w,
          const LevelLayout &layout) {
        buildSingleStageWarp(gb, kernel, p, w, layout);
      },
      [&](ImplicitLocOpBuilder &ib, const QuerySite &site, Value lane) {
        buildIfThen(ib, isLaneZero(ib, lane), [&](ImplicitLocOpBuilder &lb) {
          storeInvalidRow(lb, kernel.arg("selection"), p.topK,
                          {site.batch, site.kvHead, site.query});
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
      std::optional<uint64_t> capacity = op.getCapacity();
      LevelLayout layout(b, numKeys, p.blockSize, p.fanout, Value(),
                         capacity ? indexConst(b, int64_t(*capacity))
                                  : Value());
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
      buildPerSequenceSingleStage(
          b, kernel, p, [&](ImplicitLocOpBuilder &sb, Value batch, Value row) {
            return packedSequence(sb, kernel.arg("cuSeqlensQ"),
                                  kernel.arg("cuSeqlensK"),
                                  dimOf(sb, kernel.arg("queries"), 2),
                                  dimOf(sb, kernel.arg("keys"), 2), batch, row,
                                  p.blockSize);
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

/// Batched decode over caches: the single-stage kernel, each warp reading
/// its sequence's length N_b from seq_lens (its queries the last Nq
/// positions) and walking the cache's capacity layout; a length outside
/// [Nq, Ncap] gives its rows kInvalidInput.
struct SelectDecodeToGPU : KernelOpPattern<SelectDecodeKernelOp> {
  using KernelOpPattern::KernelOpPattern;
  void lower(SelectDecodeKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    Problem p = problemOf(op.getQueries(), op.getKeys(), op.getTopk(),
                          op.getBranching(), op.getBlockSize(),
                          op.getScale().convertToFloat(), Value());
    const int64_t capacity = bufferType(op.getKeys()).getShape()[2];
    Kernel kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      kernel = createKernel(rewriter, op, "select_decode",
                            {{"queries", p.queries},
                             {"keys", bufferType(op.getKeys())},
                             {"pyramid", bufferType(op.getPyramid())},
                             {"seqLens", bufferType(op.getSeqLens())},
                             {"selection", bufferType(op.getSelection())}},
                            {}, scratchTypes(rewriter.getContext(), p));
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      buildPerSequenceSingleStage(
          b, kernel, p,
          [&](ImplicitLocOpBuilder &sb, Value batch, Value row) {
            using P = arith::CmpIPredicate;
            Value numQueries = dimOf(sb, kernel.arg("queries"), 2);
            // Signed: a negative length breaks the rule too.
            Value n = toIndex(sb, memref::LoadOp::create(
                                      sb, kernel.arg("seqLens"), batch));
            Value cap = indexConst(sb, capacity);
            Value valid =
                arith::AndIOp::create(sb, cmp(sb, P::sle, numQueries, n),
                                      cmp(sb, P::sle, n, cap));
            WarpSequence seq = batchedSequence(
                sb, batch, row, arith::SubIOp::create(sb, n, numQueries), n);
            seq.valid = valid;
            seq.capacity = cap;
            return seq;
          });
    }
    launch(host, kernel,
           host.createOrFold<arith::CeilDivUIOp>(
               dimOf(host, op.getQueries(), 2), indexConst(host, kWarpQueries)),
           groupsOf(host, op.getSelection(), p.kvHeads), kQueryThreads,
           {{"queries", op.getQueries()},
            {"keys", op.getKeys()},
            {"pyramid", op.getPyramid()},
            {"seqLens", op.getSeqLens()},
            {"selection", op.getSelection()}});
  }
};

} // namespace

void mlir::pisa::detail::addSingleStagePatterns(RewritePatternSet &patterns) {
  patterns.add<SelectSingleStageToGPU, SelectSingleStageVarlenToGPU,
               SelectDecodeToGPU>(
      patterns.getContext());
}
