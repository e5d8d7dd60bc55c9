//===- PyramidToGPU.cpp - pisa.kernel.pyramid to gpu kernels --------------===//
//
// One block per (node, batch x KV head), one thread per feature: the leaf
// kernel averages a block of raw keys, the level kernel (launched once per
// upper level, with the level's offsets as arguments) averages g children
// of the packed pyramid. The small levels at the top (at most
// kTopLevelsPerPass(d) nodes x 4 on their widest) are built by one launch,
// one block per (batch, KV head) looping up the levels with a barrier
// between them: their level kernels would run faster than they can be
// enqueued (a 4K call's top levels). All accumulate in f32 in the contract's
// order; reads are coalesced across the feature dimension. The varlen form
// numbers the leaves (and each level's nodes) over the whole batch and lets
// every block find its sequence (PackedSequences.h); it launches a level kernel
// per level of the longest possible sequence, and a block past its sequence's
// levels returns at once.
//
//===----------------------------------------------------------------------===//

#include "Kernels/KernelBuilder.h"
#include "Pyramid/PyramidAppend.h"
#include "Pyramid/PyramidRows.h"
#include "Selection/PackedSequences.h"

#include "../Common/LevelLayout.h"
#include "../Common/LoopBuilders.h"
#include "../Common/VarlenRows.h"

#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <functional>

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

void mlir::pisa::detail::emitMean(ImplicitLocOpBuilder &b, Value src, Value dst,
                                  Value batch, Value head, Value base,
                                  Value count, Value row, Value feature,
                                  const RowIndices &srcAt) {
  Value zero = indexConst(b, 0);
  auto sum = buildLoop(
      b, zero, count, {f32Const(b, 0.0f)},
      [&](ImplicitLocOpBuilder &lb, Value c, ValueRange acc) {
        Value at = arith::AddIOp::create(lb, base, c);
        Value v =
            extractF32(lb, src,
                       srcAt ? srcAt(lb, at, feature)
                             : SmallVector<Value>{batch, head, at, feature});
        return SmallVector<Value>{arith::AddFOp::create(lb, acc[0], v)};
      });
  Value n = arith::UIToFPOp::create(
      b, b.getF32Type(),
      arith::IndexCastUIOp::create(b, b.getI64Type(), count));
  memref::StoreOp::create(b, arith::DivFOp::create(b, sum[0], n), dst,
                          ValueRange{batch, head, row, feature});
}

int64_t mlir::pisa::detail::topLevelRows(int64_t d) {
  return std::max<int64_t>(1, kMaxGPUThreads / d);
}
int64_t mlir::pisa::detail::pyramidAppendThreads(int64_t d) {
  return topLevelRows(d) * d;
}

/// The widest level the top-levels kernel builds: four passes of its rows.
static int64_t topLevelMaxNodes(int64_t d) { return 4 * topLevelRows(d); }

RowBlock mlir::pisa::detail::rowBlock(ImplicitLocOpBuilder &b, int64_t numHeads,
                                      int64_t d, int64_t threads) {
  Value bh = blockIdY(b), heads = indexConst(b, numHeads);
  Value batch = arith::DivUIOp::create(b, bh, heads);
  Value head = arith::RemUIOp::create(b, bh, heads);
  Value tid = threadIdX(b), cD = indexConst(b, d);
  Value feature = arith::RemUIOp::create(b, tid, cD);
  Value row = arith::DivUIOp::create(b, tid, cD);
  return {batch, head, {row, feature, threads / d}};
}

void mlir::pisa::detail::emitLevelNodes(ImplicitLocOpBuilder &b, Value pyramid,
                                        Value batch, Value head,
                                        Value childOffset, Value childCount,
                                        Value levelOffset, Value first,
                                        Value end, const BlockRows &rows,
                                        int64_t fan) {
  Value cFan = indexConst(b, fan);
  buildLoop(b, arith::AddIOp::create(b, first, rows.row), end,
            indexConst(b, rows.count), {},
            [&](ImplicitLocOpBuilder &nb, Value node, ValueRange) {
              Value firstChild = arith::MulIOp::create(nb, node, cFan);
              Value children = arith::MinUIOp::create(
                  nb, cFan, arith::SubIOp::create(nb, childCount, firstChild));
              emitMean(nb, pyramid, pyramid, batch, head,
                       arith::AddIOp::create(nb, childOffset, firstChild),
                       children, arith::AddIOp::create(nb, levelOffset, node),
                       rows.feature);
              return SmallVector<Value>{};
            });
}

/// The kernel that builds every level above a child level of `childCount`
/// nodes at row `childOffset` (childCount <= g x topLevelMaxNodes(d)), for
/// batch x head blockIdx.y. Every thread reads only rows written before the
/// barrier that ends the previous level.
static Kernel buildTopLevelsKernel(PatternRewriter &rewriter, Operation *op,
                                   MemRefType pyrMem, int64_t numHeads,
                                   int64_t d, int64_t fan) {
  Type index = rewriter.getIndexType();
  Kernel kernel = createKernel(
      rewriter, op, "pyramid_top_levels",
      {{"pyramid", pyrMem}, {"childOffset", index}, {"childCount", index}});
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  RowBlock at = rowBlock(b, numHeads, d, topLevelRows(d) * d);
  Value cFan = indexConst(b, fan);
  Value one = indexConst(b, 1);
  // Levels above a child level of at most g x maxNodes nodes.
  int64_t levels = 0;
  for (int64_t n = fan * topLevelMaxNodes(d); n > 1; n = ceilDiv(n, fan))
    ++levels;
  buildLoop(b, indexConst(b, 0), indexConst(b, levels),
            {kernel.arg("childOffset"), kernel.arg("childCount")},
            [&](ImplicitLocOpBuilder &lb, Value, ValueRange st) {
              Value childOffset = st[0], childCount = st[1];
              Value levelOffset =
                  arith::AddIOp::create(lb, childOffset, childCount);
              Value size = arith::CeilDivUIOp::create(lb, childCount, cFan);
              // The level exists while its child level has more than one node.
              Value nodes = arith::SelectOp::create(
                  lb, cmp(lb, arith::CmpIPredicate::ugt, childCount, one), size,
                  indexConst(lb, 0));
              emitLevelNodes(lb, kernel.arg("pyramid"), at.batch, at.head,
                             childOffset, childCount, levelOffset,
                             indexConst(lb, 0), nodes, at.rows, fan);
              gpu::BarrierOp::create(lb);
              return SmallVector<Value>{levelOffset, size};
            });
  gpu::ReturnOp::create(b);
  return kernel;
}

namespace {
/// pyramid_leaves: block (leaf, batch x head), a thread per feature, the
/// mean of the leaf's keys.
static Kernel buildLeafKernel(PatternRewriter &rewriter, Operation *op,
                              MemRefType keysMem, MemRefType pyrMem,
                              int64_t blockSize) {
  Kernel kernel = createKernel(rewriter, op, "pyramid_leaves",
                               {{"keys", keysMem}, {"pyramid", pyrMem}});
  ImplicitLocOpBuilder kb(op->getLoc(), rewriter);
  Value leaf = blockIdX(kb), bh = blockIdY(kb), e = threadIdX(kb);
  Value heads = indexConst(kb, keysMem.getShape()[1]);
  Value batch = arith::DivUIOp::create(kb, bh, heads);
  Value head = arith::RemUIOp::create(kb, bh, heads);
  Value cBlock = indexConst(kb, blockSize);
  Value first = arith::MulIOp::create(kb, leaf, cBlock);
  Value numKeys = dimOf(kb, kernel.arg("keys"), 2);
  Value count = arith::MinUIOp::create(
      kb, cBlock, arith::SubIOp::create(kb, numKeys, first));
  emitMean(kb, kernel.arg("keys"), kernel.arg("pyramid"), batch, head, first,
           count, leaf, e);
  gpu::ReturnOp::create(kb);
  return kernel;
}

/// pyramid_level: block (node, batch x head), a thread per feature, the
/// mean of the node's children in the level below.
static Kernel buildLevelKernel(PatternRewriter &rewriter, Operation *op,
                               MemRefType pyrMem, int64_t fan) {
  Type index = rewriter.getIndexType();
  Kernel kernel = createKernel(rewriter, op, "pyramid_level",
                               {{"pyramid", pyrMem},
                                {"childOffset", index},
                                {"levelOffset", index},
                                {"childCount", index}});
  ImplicitLocOpBuilder lb(op->getLoc(), rewriter);
  Value node = blockIdX(lb), lbh = blockIdY(lb), le = threadIdX(lb);
  Value lheads = indexConst(lb, pyrMem.getShape()[1]);
  Value lbatch = arith::DivUIOp::create(lb, lbh, lheads);
  Value lhead = arith::RemUIOp::create(lb, lbh, lheads);
  Value srcOffset = kernel.arg("childOffset");
  Value dstOffset = kernel.arg("levelOffset");
  Value srcCount = kernel.arg("childCount");
  Value cFan = indexConst(lb, fan);
  Value firstChild = arith::MulIOp::create(lb, node, cFan);
  Value children = arith::MinUIOp::create(
      lb, cFan, arith::SubIOp::create(lb, srcCount, firstChild));
  emitMean(lb, kernel.arg("pyramid"), kernel.arg("pyramid"), lbatch, lhead,
           arith::AddIOp::create(lb, srcOffset, firstChild), children,
           arith::AddIOp::create(lb, dstOffset, node), le);
  gpu::ReturnOp::create(lb);
  return kernel;
}

struct PyramidKernelToGPU : OpRewritePattern<PyramidKernelOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PyramidKernelOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics())
      return rewriter.notifyMatchFailure(op, "expected the buffer form");
    viewTokenMajorOperands(rewriter, op);
    auto keysMem = cast<MemRefType>(op.getKeys().getType());
    auto pyrMem = cast<MemRefType>(op.getPyramid().getType());
    ArrayRef<int64_t> shape = keysMem.getShape();
    const int64_t numHeads = shape[1], d = shape[3];
    const int64_t blockSize = op.getBlockSize(), fan = op.getBranching();
    Location loc = op.getLoc();

    Kernel leafKernel, levelKernel, topKernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      leafKernel = buildLeafKernel(rewriter, op, keysMem, pyrMem, blockSize);
      levelKernel = buildLevelKernel(rewriter, op, pyrMem, fan);
      topKernel = buildTopLevelsKernel(rewriter, op, pyrMem, numHeads, d, fan);
    }

    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder b(loc, rewriter);
    Value keys = op.getKeys(), pyramid = op.getPyramid();
    LevelLayout layout(b, dimOf(b, keys, 2), blockSize, fan);
    Value batch = dimOf(b, keys, 0);
    Value groups =
        b.createOrFold<arith::MulIOp>(batch, indexConst(b, numHeads));
    launch(b, leafKernel, layout.numLeaves(), groups, d,
           {{"keys", keys}, {"pyramid", pyramid}});
    const int64_t maxTopNodes = topLevelMaxNodes(d);
    const int64_t topThreads = topLevelRows(d) * d;
    auto launchTop = [&](Value childOffset, Value childCount, Value grid) {
      launch(b, topKernel, grid, groups, topThreads,
             {{"pyramid", pyramid},
              {"childOffset", childOffset},
              {"childCount", childCount}});
    };
    if (const std::optional<PyramidLayout> &fixed = layout.fixed()) {
      int64_t l = 2;
      for (; l <= fixed->numLevels() && fixed->size(l) > maxTopNodes; ++l)
        launch(b, levelKernel, indexConst(b, fixed->size(l)), groups, d,
               {{"pyramid", pyramid},
                {"childOffset", indexConst(b, fixed->offset(l - 1))},
                {"levelOffset", indexConst(b, fixed->offset(l))},
                {"childCount", indexConst(b, fixed->size(l - 1))}});
      if (l <= fixed->numLevels())
        launchTop(indexConst(b, fixed->offset(l - 1)),
                  indexConst(b, fixed->size(l - 1)), indexConst(b, 1));
    } else {
      // Level by level upwards while a level is too wide for the
      // top-levels kernel: level l has ceil(M_{l-1} / g) nodes and starts
      // where level l - 1 ends. The state is the child level of the next
      // level (its offset and size), where the top-levels kernel starts.
      Value cMax = indexConst(b, maxTopNodes), one = indexConst(b, 1);
      SmallVector<Value> top = buildLoop(
          b, indexConst(b, 1), layout.numLevels(),
          {indexConst(b, 0), layout.numLeaves()},
          [&](ImplicitLocOpBuilder &lb, Value, ValueRange st) {
            Value levelOffset = arith::AddIOp::create(lb, st[0], st[1]);
            Value size =
                arith::CeilDivUIOp::create(lb, st[1], indexConst(lb, fan));
            Value wide = cmp(lb, arith::CmpIPredicate::ugt, size, cMax);
            launch(lb, levelKernel,
                   arith::SelectOp::create(lb, wide, size, indexConst(lb, 0)),
                   groups, d,
                   {{"pyramid", pyramid},
                    {"childOffset", st[0]},
                    {"levelOffset", levelOffset},
                    {"childCount", st[1]}});
            return SmallVector<Value>{
                arith::SelectOp::create(lb, wide, levelOffset, st[0]),
                arith::SelectOp::create(lb, wide, size, st[1])};
          });
      // No level above a single node (N <= C, or N = 0).
      Value any = cmp(b, arith::CmpIPredicate::ugt, top[1], one);
      launchTop(top[0], top[1],
                arith::SelectOp::create(b, any, one, indexConst(b, 0)));
    }
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

/// A varlen pyramid block's sequence and node: slot blockIdx.x of a level
/// whose nodes span `span` leaves, for KV head blockIdx.y and feature
/// threadIdx.x.
struct VarlenSlot {
  Value seq, node, head, feature;
  PackedKeys keys;
  Value leaves, firstRow;
};

static VarlenSlot varlenSlot(ImplicitLocOpBuilder &b, Value cu,
                             Value numKeyRows, int64_t blockSize, Value span) {
  Value slot = blockIdX(b);
  Value numSeqs = arith::SubIOp::create(b, dimOf(b, cu, 0), indexConst(b, 1));
  auto firstSlot = [&](ImplicitLocOpBuilder &lb, Value s) {
    return firstNodeSlot(lb, cuEntry(lb, cu, s), s, blockSize, span);
  };
  Value seq = findSequence(b, numSeqs, slot, firstSlot);
  PackedKeys keys = packedKeys(b, cu, numKeyRows, seq);
  // A batch whose cu_seqlens break a rule writes no pyramid row.
  keys.valid =
      arith::AndIOp::create(b, keys.valid, batchRulesHold(b, cu, numKeyRows));
  return {seq,
          arith::SubIOp::create(b, slot, firstSlot(b, seq)),
          blockIdY(b),
          threadIdX(b),
          keys,
          arith::CeilDivUIOp::create(b, keys.count, indexConst(b, blockSize)),
          firstPyramidRow(b, keys.first, seq, blockSize)};
}

/// The leaf kernel of pisa.kernel.pyramid_varlen.
static Kernel buildVarlenLeafKernel(PatternRewriter &rewriter, Operation *op,
                                    MemRefType keys, MemRefType cu,
                                    MemRefType pyramid, int64_t blockSize) {
  Kernel kernel =
      createKernel(rewriter, op, "pyramid_varlen_leaves",
                   {{"keys", keys}, {"cuSeqlens", cu}, {"pyramid", pyramid}});
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  VarlenSlot s =
      varlenSlot(b, kernel.arg("cuSeqlens"), dimOf(b, kernel.arg("keys"), 2),
                 blockSize, indexConst(b, 1));
  Value cBlock = indexConst(b, blockSize);
  Value exists = arith::AndIOp::create(
      b, s.keys.valid, cmp(b, arith::CmpIPredicate::ult, s.node, s.leaves));
  buildIfThen(b, exists, [&](ImplicitLocOpBuilder &tb) {
    Value first = arith::MulIOp::create(tb, s.node, cBlock);
    Value count = arith::MinUIOp::create(
        tb, cBlock, arith::SubIOp::create(tb, s.keys.count, first));
    emitMean(tb, kernel.arg("keys"), kernel.arg("pyramid"), indexConst(tb, 0),
             s.head, arith::AddIOp::create(tb, s.keys.first, first), count,
             arith::AddIOp::create(tb, s.firstRow, s.node), s.feature);
  });
  gpu::ReturnOp::create(b);
  return kernel;
}

/// The level kernel of pisa.kernel.pyramid_varlen: level `level` (>= 2)
/// of every sequence that has it, its nodes spanning `span` leaves.
static Kernel buildVarlenLevelKernel(PatternRewriter &rewriter, Operation *op,
                                     MemRefType cu, MemRefType pyramid,
                                     int64_t blockSize, int64_t fan) {
  Type index = rewriter.getIndexType();
  Kernel kernel = createKernel(rewriter, op, "pyramid_varlen_level",
                               {{"pyramid", pyramid},
                                {"cuSeqlens", cu},
                                {"numKeyRows", index},
                                {"level", index},
                                {"span", index}});
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  // The keys are not read here; their row count bounds cu_k.
  VarlenSlot s =
      varlenSlot(b, kernel.arg("cuSeqlens"), kernel.arg("numKeyRows"),
                 blockSize, kernel.arg("span"));
  Value cFan = indexConst(b, fan);
  // Levels 1 .. level - 1 of this sequence: where the child level starts
  // and how many nodes it has.
  SmallVector<Value> child = buildLoop(
      b, indexConst(b, 2), kernel.arg("level"), {indexConst(b, 0), s.leaves},
      [&](ImplicitLocOpBuilder &lb, Value, ValueRange st) {
        return SmallVector<Value>{arith::AddIOp::create(lb, st[0], st[1]),
                                  arith::CeilDivUIOp::create(lb, st[1], cFan)};
      });
  Value childOffset = child[0], childCount = child[1];
  Value size = arith::CeilDivUIOp::create(b, childCount, cFan);
  // The level exists when its child level has more than one node.
  Value exists = arith::AndIOp::create(
      b, s.keys.valid,
      arith::AndIOp::create(
          b, cmp(b, arith::CmpIPredicate::ugt, childCount, indexConst(b, 1)),
          cmp(b, arith::CmpIPredicate::ult, s.node, size)));
  buildIfThen(b, exists, [&](ImplicitLocOpBuilder &tb) {
    Value firstChild = arith::MulIOp::create(tb, s.node, cFan);
    Value children = arith::MinUIOp::create(
        tb, cFan, arith::SubIOp::create(tb, childCount, firstChild));
    Value childRow = arith::AddIOp::create(tb, s.firstRow, childOffset);
    Value levelRow = arith::AddIOp::create(tb, childRow, childCount);
    emitMean(tb, kernel.arg("pyramid"), kernel.arg("pyramid"),
             indexConst(tb, 0), s.head,
             arith::AddIOp::create(tb, childRow, firstChild), children,
             arith::AddIOp::create(tb, levelRow, s.node), s.feature);
  });
  gpu::ReturnOp::create(b);
  return kernel;
}

namespace {
/// pisa.kernel.pyramid_varlen: the leaf kernel over floor(Tk / C) + B
/// slots, then one level kernel per level of N = Tk.
struct PyramidVarlenKernelToGPU : OpRewritePattern<PyramidVarlenKernelOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PyramidVarlenKernelOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics())
      return rewriter.notifyMatchFailure(op, "expected the buffer form");
    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value keys = viewAsBatchOfOne(b, op.getKeys());
    Value pyramid = viewAsBatchOfOne(b, op.getPyramid());
    Value cu = op.getCuSeqlens();
    auto keysMem = cast<MemRefType>(keys.getType());
    auto pyrMem = cast<MemRefType>(pyramid.getType());
    auto cuMem = cast<MemRefType>(cu.getType());
    const int64_t blockSize = op.getBlockSize(), fan = op.getBranching();
    Kernel leafKernel, levelKernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      leafKernel = buildVarlenLeafKernel(rewriter, op, keysMem, cuMem, pyrMem,
                                         blockSize);
      levelKernel =
          buildVarlenLevelKernel(rewriter, op, cuMem, pyrMem, blockSize, fan);
    }
    const int64_t d = keysMem.getShape()[3];
    Value heads = indexConst(b, keysMem.getShape()[1]);
    Value numKeyRows = dimOf(b, op.getKeys(), 0);
    Value numSeqs = arith::SubIOp::create(b, dimOf(b, cu, 0), indexConst(b, 1));
    // Slots of a level: floor(floor(Tk / C) / span) + B.
    auto slots = [&](ImplicitLocOpBuilder &sb, Value span) -> Value {
      Value leaves =
          arith::DivUIOp::create(sb, numKeyRows, indexConst(sb, blockSize));
      return arith::AddIOp::create(sb, arith::DivUIOp::create(sb, leaves, span),
                                   numSeqs);
    };
    launch(b, leafKernel, slots(b, indexConst(b, 1)), heads, d,
           {{"keys", keys}, {"cuSeqlens", cu}, {"pyramid", pyramid}});
    // Levels 2 .. L(Tk): no sequence has more levels than N = Tk gives.
    LevelLayout longest(b, numKeyRows, blockSize, fan);
    buildLoop(b, indexConst(b, 2),
              arith::AddIOp::create(b, longest.numLevels(), indexConst(b, 1)),
              {indexConst(b, 1)},
              [&](ImplicitLocOpBuilder &lb, Value level, ValueRange st) {
                Value span =
                    arith::MulIOp::create(lb, st[0], indexConst(lb, fan));
                launch(lb, levelKernel, slots(lb, span), heads, d,
                       {{"pyramid", pyramid},
                        {"cuSeqlens", cu},
                        {"numKeyRows", numKeyRows},
                        {"level", level},
                        {"span", span}});
                return SmallVector<Value>{span};
              });
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void mlir::pisa::populatePyramidKernelToGPUPatterns(
    RewritePatternSet &patterns) {
  patterns.add<PyramidKernelToGPU, PyramidVarlenKernelToGPU>(
      patterns.getContext());
  populatePyramidAppendPatterns(patterns);
}
