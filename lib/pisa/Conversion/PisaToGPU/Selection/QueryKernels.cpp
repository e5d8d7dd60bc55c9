//===- QueryKernels.cpp - What the selection kernels share ----------------===//

#include "Selection/QueryKernels.h"
#include "Kernels/RowSoftmax.h"
#include "Selection/LaneWalk.h"
#include "Selection/LeafScoreMMA.h"
#include "Selection/PackedSequences.h"

#include "../Common/LoopBuilders.h"
#include "../Common/VarlenRows.h"

#include "pisa/Analysis/PyramidLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::pisa;

namespace mlir::pisa::detail {

MemRefType bufferType(Value v) { return cast<MemRefType>(v.getType()); }

Problem problemOf(Value queries, Value perKvHead, int64_t topK, int64_t fanout,
                  int64_t blockSize, float scale, Value numKeys) {
  ArrayRef<int64_t> q = bufferType(queries).getShape();
  int64_t kvHeads = bufferType(perKvHead).getShape()[1];
  return {kvHeads,
          q[1] / kvHeads,
          q[3],
          topK,
          fanout,
          blockSize,
          scale,
          bufferType(queries),
          getConstantIntValue(numKeys),
          KernelConfigAttr()};
}

SmallVector<KernelParam> keyCountParam(const Problem &p, Type index) {
  if (!p.dynamicKeys())
    return {};
  return {{"numKeys", index}};
}

Value keyCount(ImplicitLocOpBuilder &b, const Kernel &kernel,
               const Problem &p) {
  return p.dynamicKeys() ? kernel.arg("numKeys") : indexConst(b, *p.numKeys);
}

SmallVector<KernelOperand> keyCountOperand(const Problem &p, Value numKeys) {
  if (!p.dynamicKeys())
    return {};
  return {{"numKeys", numKeys}};
}

SmallVector<KernelParam> keyParams(const Problem &p, Type index,
                                   Value cuQueries, Value cuKeys) {
  if (!cuQueries)
    return keyCountParam(p, index);
  return {{"cuSeqlensQ", bufferType(cuQueries)},
          {"cuSeqlensK", bufferType(cuKeys)},
          {"numKeyRows", index}};
}

SmallVector<KernelOperand> keyOperands(const Problem &p, Value numKeys,
                                       Value cuQueries, Value cuKeys) {
  if (!cuQueries)
    return keyCountOperand(p, numKeys);
  return {{"cuSeqlensQ", cuQueries},
          {"cuSeqlensK", cuKeys},
          {"numKeyRows", numKeys}};
}

SmallVector<Value> queryThread(ImplicitLocOpBuilder &b, const Problem &p,
                               Value numQueries) {
  Value i = arith::AddIOp::create(
      b, arith::MulIOp::create(b, blockIdX(b), indexConst(b, kQueryThreads)),
      threadIdX(b));
  Value bk = blockIdY(b);
  Value heads = indexConst(b, p.kvHeads);
  Value inRange =
      arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i, numQueries);
  return {arith::DivUIOp::create(b, bk, heads),
          arith::RemUIOp::create(b, bk, heads), i, inRange};
}

SmallVector<Value> queryWarp(ImplicitLocOpBuilder &b, const Problem &p,
                             Value numQueries, int64_t warpsPerQuery) {
  Value tid = threadIdX(b);
  Value lanes = indexConst(b, kLanes);
  Value i, warp;
  if (warpsPerQuery > 1) {
    i = blockIdX(b);
    warp = arith::DivUIOp::create(b, tid, lanes);
  } else {
    i = arith::AddIOp::create(
        b, arith::MulIOp::create(b, blockIdX(b), indexConst(b, kWarpQueries)),
        arith::DivUIOp::create(b, tid, lanes));
    warp = indexConst(b, 0);
  }
  Value bk = blockIdY(b);
  Value heads = indexConst(b, p.kvHeads);
  Value inRange =
      arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i, numQueries);
  return {arith::DivUIOp::create(b, bk, heads),
          arith::RemUIOp::create(b, bk, heads),
          i,
          inRange,
          arith::RemUIOp::create(b, tid, lanes),
          warp};
}

Value isQueryWriter(ImplicitLocOpBuilder &b, const WarpSite &w) {
  return arith::AndIOp::create(b, isLaneZero(b, w.lane),
                               arith::CmpIOp::create(b,
                                                     arith::CmpIPredicate::eq,
                                                     w.warp, indexConst(b, 0)));
}

ScoreOperands warpOperands(Value queries, Value children, const Problem &p,
                           Value lane) {
  ScoreOperands operands{queries, children, p.groupSize, p.headDim, p.scale};
  operands.lanes = kLanes;
  operands.lane = lane;
  operands.laneSum = [](ImplicitLocOpBuilder &b, Value v) {
    return laneSum(b, v, halvingLaneMasks(kLanes));
  };
  return operands;
}

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

/// [g*K] f32 scores; then the lane walk's kept set ([1 + K] i32: warp 0
/// ranks in registers and hands out the mask and the kept lanes in order)
/// or the other walk's ranks ([g*K] i32).
SmallVector<Type> exchangeTypes(MLIRContext *ctx, const Problem &p,
                                int64_t warpsPerQuery) {
  if (warpsPerQuery == 1)
    return {};
  return {workgroupType(ctx, {p.candidates()}, Float32Type::get(ctx)),
          workgroupType(ctx,
                        {usesBlockLaneWalk(p, warpsPerQuery) ? 1 + p.topK
                                                             : p.candidates()},
                        IntegerType::get(ctx, 32))};
}

/// Binds exchangeTypes' buffers of `kernel` to the scratch's fields.
static void bindExchange(QueryScratch &scratch, const Kernel &kernel,
                         const Problem &p, int64_t warpsPerQuery) {
  auto exchange = kernel.func().getWorkgroupAttributions();
  assert(exchange.size() == 2 && "a query's block has exchangeTypes' buffers");
  scratch.shared = exchange[0];
  if (usesBlockLaneWalk(p, warpsPerQuery))
    scratch.sharedMask = exchange[1];
  else
    scratch.sharedRank = exchange[1];
}

/// Narrow lane groups (WarpQuery) where a query's block of warps scores
/// only the walk's levels with them: the lane walk with its leaves on
/// tensor cores (there they make the select kernel 22.3 us instead of 25.3
/// us at 131K on the H200, CHANGELOG.md's performance history). Elsewhere the
/// rows' loads stay one element per lane, so that many rows stay in flight (the
/// SIMT leaf scorer's 8 key rows).
static int64_t warpQueryWidth(const Problem &p, int64_t warpsPerQuery) {
  if (usesBlockLaneWalk(p, warpsPerQuery) && scoresLeavesWithMma(p))
    return narrowQueryWidth(p.groupSize, p.headDim);
  return kLanes;
}

bool usesBlockLaneWalk(const Problem &p, int64_t warpsPerQuery) {
  return warpsPerQuery > 1 && p.config &&
         p.config.getWalk() == CandidateWalk::Lanes;
}

bool scoresLeavesWithMma(const Problem &p) {
  return p.config && p.config.getVariant() == KernelVariant::MmaSync;
}

bool scoresBlockLevelsWithMma(const Problem &p, int64_t warpsPerQuery) {
  return usesBlockLaneWalk(p, warpsPerQuery) &&
         p.config.getLevelVariant() == KernelVariant::MmaSync;
}

void forEachQueryWarp(ImplicitLocOpBuilder &b, const Kernel &kernel,
                      const Problem &p, Value queries, bool mmaLevels,
                      const LevelLayout *batchLayout, WarpSequenceOf sequenceOf,
                      QueryWarpBody body, InvalidQueryBody invalid,
                      int64_t warpsPerQuery) {
  SmallVector<Value> at = queryWarp(b, p, dimOf(b, queries, 2), warpsPerQuery);
  guarded(b, at[3], [&](ImplicitLocOpBuilder &gb) {
    WarpSequence seq = sequenceOf(gb, at[0], at[2]);
    auto run = [&](ImplicitLocOpBuilder &rb) {
      std::optional<LevelLayout> own;
      if (!batchLayout)
        own.emplace(rb, seq.numKeys, p.blockSize, p.fanout, seq.firstPyramidRow,
                    seq.capacity);
      const LevelLayout &layout = batchLayout ? *batchLayout : *own;
      WarpSite w{{seq.batch, at[1], seq.query, seq.position},
                 at[4],
                 leafOfPosition(rb, layout, seq.position),
                 at[5],
                 seq.numKeys,
                 seq.firstKey,
                 scratchOf(kernel),
                 std::nullopt,
                 std::nullopt,
                 std::nullopt};
      if (warpsPerQuery > 1 && w.scratch) {
        // The query's warps exchange scores and ranks through the
        // kernel's workgroup buffers.
        bindExchange(*w.scratch, kernel, p, warpsPerQuery);
        w.scratch->warp = at[5];
        w.scratch->lane = at[4];
        w.scratch->warps = warpsPerQuery;
      }
      if (mmaLevels)
        w.mmaQuery = loadMmaWalkQuery(rb, queries, w.site, p.headDim, w.lane);
      else if (scoresBlockLevelsWithMma(p, warpsPerQuery))
        w.leafQuery = loadLeafMmaQuery(rb, queries, w.site, p.groupSize,
                                       p.headDim, w.lane);
      else
        w.query = loadWarpQuery(rb, queries, w.site, p.groupSize, p.headDim,
                                w.lane, warpQueryWidth(p, warpsPerQuery));
      body(rb, w, layout);
    };
    if (!seq.valid)
      return run(gb);
    auto ifOp = scf::IfOp::create(gb, seq.valid, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(gb);
    gb.setInsertionPointToStart(ifOp.thenBlock());
    run(gb);
    gb.setInsertionPointToStart(ifOp.elseBlock());
    if (!invalid)
      return;
    QuerySite site{seq.batch, at[1], seq.query, seq.position};
    if (warpsPerQuery == 1)
      return invalid(gb, site, at[4]);
    // A query's block: warp 0 alone writes what all of them would.
    buildIfThen(gb, cmp(gb, arith::CmpIPredicate::eq, at[5], indexConst(gb, 0)),
                [&](ImplicitLocOpBuilder &wb) { invalid(wb, site, at[4]); });
  });
}

WarpSequence batchedSequence(ImplicitLocOpBuilder &b, Value batch, Value row,
                             Value offset, Value numKeys) {
  return {batch,
          row,
          arith::AddIOp::create(b, offset, row),
          numKeys,
          indexConst(b, 0),
          Value(),
          Value(),
          Value()};
}

Value groupsOf(ImplicitLocOpBuilder &b, Value perKvHead, int64_t kvHeads) {
  return b.createOrFold<arith::MulIOp>(dimOf(b, perKvHead, 0),
                                       indexConst(b, kvHeads));
}

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

WarpSequence packedSequence(ImplicitLocOpBuilder &b, Value cuQ, Value cuK,
                            Value numQueryRows, Value numKeyRows, Value batch,
                            Value row, int64_t blockSize) {
  QueryRowSequence seq =
      sequenceOfQueryRow(b, cuQ, cuK, numQueryRows, numKeyRows, row);
  return WarpSequence{
      batch,          row,
      seq.position,   seq.keys.count,
      seq.keys.first, firstPyramidRow(b, seq.keys.first, seq.seq, blockSize),
      seq.valid,      Value()};
}

} // namespace mlir::pisa::detail
