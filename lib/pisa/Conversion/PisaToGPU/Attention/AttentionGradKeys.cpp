//===- AttentionGradKeys.cpp - dk and dv of sparse attention --------------===//
//
// pisa.kernel.sparse_attention_grad_keys: five kernels list the queries
// that attend each key block (QueryLists.cpp), and one block per (key
// block, segment of its list, batch x KV head) stages the block's keys and
// values and walks its segment's queries, 64 head rows (64 / R queries) a
// step:
//
//   S = Q K^T, dP = dO V^T, P and dS as for dq
//   dV += P^T dO, dK += dS^T Q
//
// either with dK and dV in registers (the register key kernel: each warp
// owns 16 keys, the products transposed so that the keys are the mma rows,
// WarpMma.h) or staged through shared memory (P and dS stored transposed,
// warps split dv and d); then the block's segments add their sums in a
// fixed order (addInOrder): the result does not depend on when each block
// runs. The block (KeyGradBlock.h) is set up, placed in a packed batch and
// ordered here; its walk over the segment's queries and its steps are in
// KeyGradSteps.cpp.
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionGrad.h"
#include "Attention/AttentionSteps.h"
#include "Attention/KeyGradBlock.h"
#include "Attention/SparseAttention.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/RowSoftmax.h"
#include "Kernels/WarpMma.h"
#include "Kernels/WarpgroupMma.h"
#include "Selection/PackedSequences.h"
#include "Selection/QueryKernels.h"

#include "../Common/LoopBuilders.h"

#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

using P = arith::CmpIPredicate;

KeyGradBlock::KeyGradBlock(ImplicitLocOpBuilder &b, const Kernel &e,
                           const KeyGradPlan &plan, int64_t G, int64_t kvHeads,
                           float scale)
    : e(e), p(plan), G(G), scale(scale) {
  elem = cast<MemRefType>(e.arg("queries").getType()).getElementType();
  shared.emplace(b);
  const int64_t R = p.rows.rows, c = p.blockSize;
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  if (p.warpgroup) {
    shared->alignBase(b, kSwizzleAtomBytes);
    kTile = shared->view(b, p.key, swizzledShape(c, p.headDim), elem);
    vTile = shared->view(b, p.value, swizzledShape(c, p.valueDim), elem);
    keyDesc = kMajorDescriptor(b, shared->address(b, indexConst(b, p.key)));
    valueDesc = kMajorDescriptor(b, shared->address(b, indexConst(b, p.value)));
  } else {
    kTile = shared->view(b, p.key, {c, p.headDim + 8}, elem);
    vTile = shared->view(b, p.value, {c, p.valueDim + 8}, elem);
    qTile = shared->view(b, p.query, {R, p.headDim + 8}, elem);
    doTile = shared->view(b, p.gradOut, {R, p.valueDim + 8}, elem);
  }
  if (!p.inRegisters) {
    sTile = shared->view(b, p.score, {R, c + 4}, f32);
    dpTile = shared->view(b, p.gradProb, {R, c + 4}, f32);
    pT = shared->view(b, p.probT, {c, R + 8}, elem);
    dsT = shared->view(b, p.gradScoreT, {c, R + 8}, elem);
  }
  dkTile = shared->view(b, p.gradKey, {c, p.headDim + 4}, f32);
  dvTile = shared->view(b, p.gradValue, {c, p.valueDim + 4}, f32);
  list = shared->view(b, p.list, {p.listCapacity}, i32);
  listCount = shared->view(b, p.listCount, {1}, i32);
  // Block x < S0 is segment x of key block 0 (of S0 segments); the others
  // are the S segments of key blocks 1, 2, ... in order. Block 0 is the
  // one every query of a PISA selection attends (the forced first block):
  // with S segments it would be the kernel's longest serial work.
  Value blockSegments = e.arg("segments");
  Value firstSegments = e.arg("firstSegments");
  Value x = blockIdX(b);
  Value inFirst = cmp(b, P::ult, x, firstSegments);
  Value rest = arith::SubIOp::create(
      b, arith::MaxUIOp::create(b, x, firstSegments), firstSegments);
  block = arith::SelectOp::create(
      b, inFirst, indexConst(b, 0),
      arith::AddIOp::create(b, arith::DivUIOp::create(b, rest, blockSegments),
                            indexConst(b, 1)));
  Value segments =
      arith::SelectOp::create(b, inFirst, firstSegments, blockSegments);
  // Rank r of the block's segments runs segment S - 1 - r: the chain in
  // which they add their sums (addInOrder) starts at the last segment that
  // holds queries and ends at segment 0, which writes the result; the
  // blocks that start chains come first in the grid.
  rank = arith::SelectOp::create(
      b, inFirst, x, arith::RemUIOp::create(b, rest, blockSegments));
  Value lastIndex = arith::SubIOp::create(b, segments, indexConst(b, 1));
  segment = arith::SubIOp::create(b, lastIndex, rank);
  batch = arith::DivUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
  kv = arith::RemUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
  tid = threadIdX(b);
  warp = arith::DivUIOp::create(b, tid, indexConst(b, 32));
  lane = arith::RemUIOp::create(b, tid, indexConst(b, 32));
  firstHead = arith::MulIOp::create(b, kv, indexConst(b, G));
  if (e.has("cuSeqlensQ")) {
    locatePackedBlock(b);
  } else {
    numKeys = dimOf(b, e.arg("keys"), 2);
    firstKey = arith::MulIOp::create(b, block, indexConst(b, c));
    queryShift = e.arg("queryOffset");
  }
  // The segments split the block's list in equal runs of whole steps, at
  // least kMinSegmentEntries queries each: those past its end take no part
  // (segment 0 does, so that a block no query attends still gets its zeros
  // written), and the chain of those that do starts at the last of them.
  Value index = e.arg("queryIndex");
  QueryIndexColumns columns(b, index);
  Value length = toIndex(
      b, memref::LoadOp::create(
             b, index, ValueRange{batch, kv, block, columns.column(b, 0)}));
  listStart = arith::IndexCastUIOp::create(
      b, b.getIndexType(), columns.rowStart(b, index, {batch, kv, block}));
  const int64_t tokens = p.rows.tokens;
  Value perSegment = arith::MulIOp::create(
      b,
      arith::MaxUIOp::create(
          b,
          arith::CeilDivUIOp::create(
              b, arith::CeilDivUIOp::create(b, length, segments),
              indexConst(b, tokens)),
          indexConst(b, llvm::divideCeil(kMinSegmentEntries, tokens))),
      indexConst(b, tokens));
  Value topSegment = arith::SubIOp::create(
      b,
      arith::MaxUIOp::create(b,
                             arith::CeilDivUIOp::create(b, length, perSegment),
                             indexConst(b, 1)),
      indexConst(b, 1));
  segmentBegin = arith::MinUIOp::create(
      b, arith::MulIOp::create(b, segment, perSegment), length);
  segmentEnd = arith::MinUIOp::create(
      b, arith::AddIOp::create(b, segmentBegin, perSegment), length);
  takesPart = cmp(b, P::ule, segment, topSegment);
  if (realBlock)
    takesPart = arith::AndIOp::create(b, takesPart, realBlock);
  lastSegment = cmp(b, P::eq, segment, indexConst(b, 0));
  chainRank = arith::SubIOp::create(
      b, topSegment, arith::MinUIOp::create(b, segment, topSegment));
}

void KeyGradBlock::build(ImplicitLocOpBuilder &b) {
  const int64_t c = p.blockSize;
  if (brokenBatch)
    writeBrokenRows(b);
  buildIfThen(b, takesPart, [&](ImplicitLocOpBuilder &tb) {
    // Rows past the sequence's keys (the next one's, or zeros past the
    // buffer) are masked per query.
    Value firstRow = keyRow(tb, firstKey);
    stageKeyRows(tb, e.arg("keys"), batch, kv, firstRow, c, p.headDim, kTile,
                 tid, kGradThreads);
    stageKeyRows(tb, e.arg("values"), batch, kv, firstRow, c, p.valueDim, vTile,
                 tid, kGradThreads);
    if (p.warpgroup)
      fenceSharedToTensorCores(tb); // before forEachBatch's first barrier
    if (p.inRegisters) {
      SmallVector<Value> sums = forEachBatch(
          tb, zeroSums(tb),
          [&](ImplicitLocOpBuilder &sb, Value steps, Value last,
              ValueRange st) { return registerBatch(sb, steps, last, st); });
      gpu::BarrierOp::create(tb); // the 16-bit tiles are read
      storeSums(tb, sums);
    } else {
      RowSite site(tb, p.rows, tid, firstHead, G);
      zeroTile(tb, dkTile, c * (p.headDim + 4));
      zeroTile(tb, dvTile, c * (p.valueDim + 4));
      forEachStep(tb, ValueRange{},
                  [&](ImplicitLocOpBuilder &sb, Value first, Value n,
                      ValueRange) -> SmallVector<Value> {
                    stagedStep(sb, site, first, n);
                    return {};
                  });
    }
    gpu::BarrierOp::create(tb); // the last products are in dK and dV
    addInOrder(tb);
  });
  gpu::ReturnOp::create(b);
}

void KeyGradBlock::locatePackedBlock(ImplicitLocOpBuilder &b) {
  const int64_t c = p.blockSize;
  Value cuQ = e.arg("cuSeqlensQ"), cuK = e.arg("cuSeqlensK");
  Value one = indexConst(b, 1), zero = indexConst(b, 0);
  Value numKeyRows = dimOf(b, e.arg("keys"), 2);
  Value numSeqs = arith::SubIOp::create(b, dimOf(b, cuK, 0), one);
  auto firstSlot = [&](ImplicitLocOpBuilder &lb, Value seq) {
    return firstNodeSlot(lb, cuEntry(lb, cuK, seq), seq, c, indexConst(lb, 1));
  };
  Value seq = findSequence(b, numSeqs, block, firstSlot);
  PackedKeys keys = packedKeys(b, cuK, numKeyRows, seq);
  Value q0 = cuEntry(b, cuQ, seq);
  Value q1 = cuEntry(b, cuQ, arith::AddIOp::create(b, seq, one));
  Value valid = arith::AndIOp::create(
      b, batchRulesHold(b, cuK, numKeyRows, cuQ, dimOf(b, e.arg("queries"), 2)),
      keys.valid);
  numKeys = arith::SelectOp::create(b, valid, keys.count, zero);
  keyBase = arith::SelectOp::create(b, valid, keys.first, zero);
  firstKey = arith::MulIOp::create(
      b, arith::SubIOp::create(b, block, firstSlot(b, seq)), indexConst(b, c));
  realBlock = arith::AndIOp::create(
      b, valid,
      arith::AndIOp::create(b, cmp(b, P::uge, block, firstSlot(b, seq)),
                            cmp(b, P::ult, firstKey, numKeys)));
  brokenBatch =
      arith::XOrIOp::create(b, valid, arith::ConstantIntOp::create(b, 1, 1));
  // Position of query row r: N_s - Nq_s + (r - cu_q[s]).
  Value numQueries = arith::SubIOp::create(b, q1, q0);
  Value packedOffset = arith::SubIOp::create(b, numKeys, numQueries);
  queryShift = arith::SubIOp::create(b, packedOffset, q0);
}

void KeyGradBlock::writeBrokenRows(ImplicitLocOpBuilder &b) {
  const int64_t c = p.blockSize;
  Value numKeyRows = dimOf(b, e.arg("keys"), 2);
  buildIfThen(
      b,
      arith::AndIOp::create(b, brokenBatch,
                            cmp(b, P::eq, rank, indexConst(b, 0))),
      [&](ImplicitLocOpBuilder &wb) {
        Value nan = f32Const(wb, std::numeric_limits<float>::quiet_NaN());
        Value row0 = arith::MulIOp::create(wb, block, indexConst(wb, c));
        for (const std::pair<StringRef, int64_t> &target :
             {std::pair<StringRef, int64_t>{"gradKeys", p.headDim},
              {"gradValues", p.valueDim}}) {
          const int64_t width = target.second;
          Value out = e.arg(target.first);
          Type elem = cast<MemRefType>(out.getType()).getElementType();
          Value value =
              elem.isF32() ? nan
                           : arith::TruncFOp::create(wb, elem, nan).getResult();
          buildLoop(wb, tid, indexConst(wb, c * width),
                    indexConst(wb, kGradThreads), ValueRange{},
                    [&](ImplicitLocOpBuilder &lb, Value i,
                        ValueRange) -> SmallVector<Value> {
                      Value row = arith::AddIOp::create(
                          lb, row0,
                          arith::DivUIOp::create(lb, i, indexConst(lb, width)));
                      Value col =
                          arith::RemUIOp::create(lb, i, indexConst(lb, width));
                      buildIfThen(lb, cmp(lb, P::ult, row, numKeyRows),
                                  [&](ImplicitLocOpBuilder &sb) {
                                    memref::StoreOp::create(
                                        sb, value, out,
                                        ValueRange{batch, kv, row, col});
                                  });
                      return {};
                    });
        }
      });
}

void KeyGradBlock::zeroTile(ImplicitLocOpBuilder &b, Value tile,
                            int64_t elems) {
  auto type = cast<MemRefType>(tile.getType());
  const int64_t stride = type.getShape()[1];
  Value zeros = f32Splat(b, VectorType::get({4}, b.getF32Type()), 0.0f);
  buildLoop(
      b, tid, indexConst(b, elems / 4), indexConst(b, kGradThreads),
      ValueRange{},
      [&](ImplicitLocOpBuilder &lb, Value i, ValueRange) -> SmallVector<Value> {
        Value at = arith::MulIOp::create(lb, i, indexConst(lb, 4));
        Value r = arith::DivUIOp::create(lb, at, indexConst(lb, stride));
        Value col = arith::RemUIOp::create(lb, at, indexConst(lb, stride));
        storeRow(lb, zeros, tile, {r, col});
        return {};
      });
}

void KeyGradBlock::addInOrder(ImplicitLocOpBuilder &b) {
  Value index = e.arg("queryIndex");
  Value counter =
      arith::SubIOp::create(b, dimOf(b, index, 3), indexConst(b, 1));
  SmallVector<Value> at{batch, kv, block, counter};
  Value first = cmp(b, P::eq, chainRank, indexConst(b, 0));
  buildIfThen(b,
              arith::AndIOp::create(
                  b,
                  arith::XOrIOp::create(b, first,
                                        arith::ConstantIntOp::create(b, 1, 1)),
                  cmp(b, P::eq, tid, indexConst(b, 0))),
              [&](ImplicitLocOpBuilder &wb) { waitFor(wb, index, at); });
  gpu::BarrierOp::create(b);
  Value accumulators = e.arg("accumulators");
  addTile(b, dkTile, p.headDim, 0, first, e.arg("gradKeys"), scale,
          accumulators);
  addTile(b, dvTile, p.valueDim, p.headDim, first, e.arg("gradValues"), 1.0f,
          accumulators);
  // Every thread's sums are visible on the device before the counter
  // says so.
  NVVM::MembarOp::create(b, NVVM::MemScopeKind::GPU);
  gpu::BarrierOp::create(b);
  buildIfThen(
      b, cmp(b, P::eq, tid, indexConst(b, 0)), [&](ImplicitLocOpBuilder &wb) {
        memref::AtomicRMWOp::create(
            wb, arith::AtomicRMWKind::assign,
            toI32(wb, arith::AddIOp::create(wb, chainRank, indexConst(wb, 1))),
            index, at);
      });
}

void KeyGradBlock::waitFor(ImplicitLocOpBuilder &b, Value index,
                           ArrayRef<Value> at) {
  Type i32 = b.getI32Type();
  Value want = toI32(b, chainRank);
  scf::WhileOp::create(
      b, TypeRange{}, ValueRange{},
      [&](OpBuilder &ob, Location loc, ValueRange) {
        ImplicitLocOpBuilder cb(loc, ob);
        Value now = memref::AtomicRMWOp::create(
            cb, arith::AtomicRMWKind::addi,
            arith::ConstantIntOp::create(cb, 0, 32), index, at);
        scf::ConditionOp::create(cb, cmp(cb, P::ne, now, want), ValueRange{});
      },
      [&](OpBuilder &ob, Location loc, ValueRange) {
        ImplicitLocOpBuilder lb(loc, ob);
        scf::YieldOp::create(lb);
      });
  (void)i32;
  NVVM::MembarOp::create(b, NVVM::MemScopeKind::GPU);
}

void KeyGradBlock::addTile(ImplicitLocOpBuilder &b, Value tile, int64_t width,
                           int64_t column0, Value first, Value out,
                           float factor, Value accumulators) {
  // Quads i0 + u threads, u < kAddUnroll, a thread at a time: their
  // loads of the earlier sums all issue before the first add (one load
  // waited for at a time made the chain of a block's segments the
  // backward's largest cost).
  constexpr int64_t kAddUnroll = 8;
  const int64_t total = p.blockSize * width / 4;
  Type f32 = b.getF32Type();
  auto quad = VectorType::get({4}, f32);
  Value lastKey = arith::SubIOp::create(b, numKeys, indexConst(b, 1));
  buildLoop(
      b, tid, indexConst(b, total), indexConst(b, kGradThreads * kAddUnroll),
      ValueRange{},
      [&](ImplicitLocOpBuilder &lb, Value i0,
          ValueRange) -> SmallVector<Value> {
        struct Quad {
          Value inTile, r, col, key, accCol;
        };
        SmallVector<Quad> quads;
        SmallVector<Value> own;
        for (int64_t u = 0; u < kAddUnroll; ++u) {
          Value i =
              arith::AddIOp::create(lb, i0, indexConst(lb, u * kGradThreads));
          Value at = arith::MinUIOp::create(lb, i, indexConst(lb, total - 1));
          Value r = arith::DivUIOp::create(lb, at, indexConst(lb, width / 4));
          Value col = arith::MulIOp::create(
              lb, arith::RemUIOp::create(lb, at, indexConst(lb, width / 4)),
              indexConst(lb, 4));
          Value key = arith::AddIOp::create(lb, firstKey, r);
          Value inTile = arith::AndIOp::create(
              lb, cmp(lb, P::ult, i, indexConst(lb, total)),
              cmp(lb, P::ult, key, numKeys));
          quads.push_back(
              {inTile, r, col, keyRow(lb, key),
               arith::AddIOp::create(lb, col, indexConst(lb, column0))});
          own.push_back(loadRow(lb, tile, {r, col}, 4, f32));
        }
        SmallVector<Type> types(kAddUnroll, quad);
        SmallVector<Value> sums = buildIf(
            lb, first, types, [&](ImplicitLocOpBuilder &) { return own; },
            [&](ImplicitLocOpBuilder &ab) {
              // A quad past N reads the last key's sums (in bounds) and
              // is not stored.
              SmallVector<Value> before, added;
              for (const Quad &q : quads)
                before.push_back(loadRow(
                    ab, accumulators,
                    {batch, kv,
                     arith::MinUIOp::create(ab, q.key, keyRow(ab, lastKey)),
                     q.accCol},
                    4, f32));
              for (auto [x, y] : llvm::zip(before, own))
                added.push_back(arith::AddFOp::create(ab, x, y));
              return added;
            });
        for (size_t u = 0; u < quads.size(); ++u) {
          const Quad &q = quads[u];
          Value sum = sums[u];
          buildIfThen(lb, arith::AndIOp::create(lb, q.inTile, lastSegment),
                      [&](ImplicitLocOpBuilder &ob) {
                        Value v = arith::MulFOp::create(
                            ob, sum, f32Splat(ob, quad, factor));
                        storeRow(ob, toElementsOf(ob, v, out), out,
                                 {batch, kv, q.key, q.col});
                      });
          buildIfThen(
              lb,
              arith::AndIOp::create(
                  lb, q.inTile,
                  arith::XOrIOp::create(
                      lb, lastSegment, arith::ConstantIntOp::create(lb, 1, 1))),
              [&](ImplicitLocOpBuilder &ob) {
                storeRow(ob, sum, accumulators, {batch, kv, q.key, q.accCol});
              });
        }
        return {};
      });
}

namespace {

struct GradKeysToGPU : KernelOpPattern<SparseAttentionGradKeysKernelOp> {
  using KernelOpPattern::KernelOpPattern;

  void lower(SparseAttentionGradKeysKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    MemRefType qType = bufferType(op.getQueries());
    const int64_t kvHeads = bufferType(op.getKeys()).getShape()[1];
    const int64_t G = qType.getShape()[1] / kvHeads;
    const int64_t topK = bufferType(op.getSelection()).getShape()[3];
    KernelConfigAttr config = getKernelConfig(op);
    KeyGradPlan plan(
        G, qType.getShape()[3], bufferType(op.getValues()).getShape()[3],
        op.getBlockSize(), config.getEpilogue() == KernelEpilogue::Registers,
        config.getVariant() == KernelVariant::Wgmma, bool(op.getScores()));
    plan.prefetchSteps = config.getPrefetchAhead().value_or(0);
    Value index = op.getQueryIndex();
    SmallVector<KernelOperand> listOperands{
        {"selection", op.getSelection()},
        {"keys", op.getKeys()},
        {"queryOffset", op.getQueryOffset()},
        {"index", index},
        {"list", op.getQueryList()}};
    addPackedOperands(listOperands, op.getCuSeqlensQ(), op.getCuSeqlensK());
    // At most ceil(Nq / kMinSegmentQueries) segments (at least one): for
    // key block 0 of a batch's rows up to kMaxFirstBlockSegments, for the
    // others (and every block slot of a packed batch) up to
    // kKeySegmentBlocks / (key blocks x B x Hkv), at most kMaxKeySegments
    // (AttentionGrad.h).
    Value numQueries = dimOf(host, op.getSelection(), 2);
    auto segmentsUpTo = [&](Value most) -> Value {
      return arith::MaxUIOp::create(
          host,
          arith::MinUIOp::create(
              host,
              arith::CeilDivUIOp::create(host, numQueries,
                                         indexConst(host, kMinSegmentQueries)),
              most),
          indexConst(host, 1));
    };
    Value gridBlocks = arith::MaxUIOp::create(
        host,
        arith::MulIOp::create(host, dimOf(host, index, 2),
                              arith::MulIOp::create(host, dimOf(host, index, 0),
                                                    dimOf(host, index, 1))),
        indexConst(host, 1));
    Value mostSegments = arith::MinUIOp::create(
        host,
        arith::CeilDivUIOp::create(host, indexConst(host, kKeySegmentBlocks),
                                   gridBlocks),
        indexConst(host, kMaxKeySegments));
    Value segments = segmentsUpTo(mostSegments);
    Value firstSegments =
        op.getCuSeqlensQ()
            ? segments
            : segmentsUpTo(indexConst(host, kMaxFirstBlockSegments));
    SmallVector<KernelOperand> operands{{"queries", op.getQueries()},
                                        {"keys", op.getKeys()},
                                        {"values", op.getValues()},
                                        {"queryOffset", op.getQueryOffset()},
                                        {"lse", op.getLse()},
                                        {"delta", op.getDelta()},
                                        {"gradOutput", op.getGradOutput()},
                                        {"queryIndex", index},
                                        {"queryList", op.getQueryList()},
                                        {"gradKeys", op.getGradKeys()},
                                        {"gradValues", op.getGradValues()},
                                        {"accumulators", op.getAccumulators()},
                                        {"segments", segments},
                                        {"firstSegments", firstSegments}};
    if (op.getScores())
      operands.push_back({"scores", op.getScores()});
    addPackedOperands(operands, op.getCuSeqlensQ(), op.getCuSeqlensK());
    launchQueryLists(rewriter, host, op, topK, listOperands);
    Kernel kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      kernel =
          createKernelFor(rewriter, op, "sparse_attention_grad_keys", operands);
      applyOccupancyHint(kernel.func(), config);
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      KeyGradBlock(b, kernel, plan, G, kvHeads, op.getScale().convertToFloat())
          .build(b);
    }
    Value groups = arith::MulIOp::create(host, dimOf(host, op.getQueries(), 0),
                                         indexConst(host, kvHeads));
    // (blocks - 1) S + S0 blocks, none where there is no key block.
    Value keyBlocks = dimOf(host, index, 2);
    Value gridX = arith::SelectOp::create(
        host, cmp(host, P::eq, keyBlocks, indexConst(host, 0)),
        indexConst(host, 0),
        arith::AddIOp::create(
            host,
            arith::MulIOp::create(
                host,
                arith::SubIOp::create(host, keyBlocks, indexConst(host, 1)),
                segments),
            firstSegments));
    launch(host, kernel, gridX, groups, config.getThreads(), operands,
           plan.bytes);
  }
};

} // namespace

void mlir::pisa::detail::populateAttentionGradKeysPatterns(
    RewritePatternSet &patterns) {
  patterns.add<GradKeysToGPU>(patterns.getContext());
}
