//===- PyramidAppend.cpp - pisa.kernel.pyramid_append to a gpu kernel -----===//
//
// The append of docs/semantics.md, section 4, as a kernel body
// (emitPyramidAppend, also run first by the fused decode-step kernel) and
// as its own kernel: a block per (batch, KV head) recomputes the leaves
// from the first changed one and level by level the nodes above them, or,
// when the new keys fall in the last leaf, only that leaf's path, in
// registers.
//
//===----------------------------------------------------------------------===//

#include "Pyramid/PyramidAppend.h"
#include "Kernels/KernelBuilder.h"
#include "Pyramid/PyramidRows.h"

#include "../Common/LoopBuilders.h"

#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

/// Levels above the leaves of any pyramid of at most `maxKeys` keys.
static int64_t maxUpperLevels(int64_t maxKeys, int64_t blockSize, int64_t fan) {
  int64_t levels = 0;
  for (int64_t n = ceilDiv(maxKeys, blockSize); n > 1; n = ceilDiv(n, fan))
    ++levels;
  return levels;
}

/// An append whose keys all fall in the sequence's last leaf (one token of
/// a decode step, or a few): the leaf and, at each level up to the root,
/// the last node, which is the only one that changes. Row 0's threads (a
/// feature each) load the leaf's keys and the siblings of every path node
/// at once, then compute the path in registers, adding children in the
/// contract's order (docs/semantics.md, section 4) so that the nodes are
/// bitwise those of the general update: a masked key or sibling adds +0,
/// which changes no sum, as a sum started from +0 is never -0.
/// What emitLastLeafAppend holds in registers per thread: the leaf's keys
/// in flight (16 with 64 registers in a block of 1024, 32 with 128 in a
/// block of 512), the path's siblings; and the largest leaf it takes.
constexpr int64_t kMaxPathSiblings = 24, kMaxPathLeafKeys = 256;
static int64_t pathKeysInFlight(int64_t threads) {
  return threads > 512 ? 16 : 32;
}

namespace {
/// One level of the last leaf's path: whether its node exists (its child
/// level has more than one node), the node's row, its children, and the
/// siblings of the path's child (+0 where there is none).
struct PathLevel {
  Value exists, row, children;
  SmallVector<Value> siblings;
};
} // namespace

/// The path's levels above `leaf` for n keys in the capacity's layout, the
/// siblings loaded from the pyramid (each level's node is the last of it).
static SmallVector<PathLevel> loadPathLevels(ImplicitLocOpBuilder &b,
                                             Value pyramid, Value batch,
                                             Value head, Value feature, Value n,
                                             Value capacity, int64_t blockSize,
                                             int64_t fan, int64_t levels) {
  using P = arith::CmpIPredicate;
  Value zero = indexConst(b, 0), one = indexConst(b, 1);
  Value cFan = indexConst(b, fan), cBlock = indexConst(b, blockSize);
  Value zeroF = f32Const(b, 0.0f);
  SmallVector<PathLevel> path;
  Value capOffset = zero,
        capCount = arith::CeilDivUIOp::create(b, capacity, cBlock);
  Value childCount = arith::CeilDivUIOp::create(b, n, cBlock);
  for (int64_t l = 0; l < levels; ++l) {
    PathLevel level;
    Value levelOffset = arith::AddIOp::create(b, capOffset, capCount);
    level.exists = cmp(b, P::ugt, childCount, one);
    Value node = arith::DivUIOp::create(
        b, arith::SubIOp::create(b, childCount, one), cFan);
    Value firstChild = arith::MulIOp::create(b, node, cFan);
    level.children = arith::SubIOp::create(b, childCount, firstChild);
    level.row = arith::AddIOp::create(b, levelOffset, node);
    for (int64_t c = 0; c + 1 < fan; ++c) {
      Value real = arith::AndIOp::create(
          b, level.exists,
          cmp(b, P::ult, indexConst(b, c + 1), level.children));
      Value row = arith::AddIOp::create(
          b, capOffset,
          arith::SelectOp::create(
              b, real, arith::AddIOp::create(b, firstChild, indexConst(b, c)),
              zero));
      Value v = memref::LoadOp::create(b, pyramid,
                                       ValueRange{batch, head, row, feature});
      level.siblings.push_back(arith::SelectOp::create(b, real, v, zeroF));
    }
    path.push_back(std::move(level));
    capOffset = levelOffset;
    capCount = arith::CeilDivUIOp::create(b, capCount, cFan);
    childCount = arith::CeilDivUIOp::create(b, childCount, cFan);
  }
  return path;
}

/// sum / count, count an index.
static Value meanOf(ImplicitLocOpBuilder &b, Value sum, Value count) {
  Value c = arith::UIToFPOp::create(
      b, b.getF32Type(),
      arith::IndexCastUIOp::create(b, b.getI64Type(), count));
  return arith::DivFOp::create(b, sum, c);
}

static void emitLastLeafAppend(ImplicitLocOpBuilder &b, Value keys,
                               Value pyramid, Value batch, Value head,
                               Value feature, Value leaf, Value n,
                               Value capacity, int64_t blockSize, int64_t fan,
                               int64_t levels, int64_t keysInFlight,
                               const RowIndices &keyAt) {
  using P = arith::CmpIPredicate;
  Value zero = indexConst(b, 0);
  Value cBlock = indexConst(b, blockSize);
  Value zeroF = f32Const(b, 0.0f);
  Value first = arith::MulIOp::create(b, leaf, cBlock);
  Value count =
      arith::MinUIOp::create(b, cBlock, arith::SubIOp::create(b, n, first));
  SmallVector<PathLevel> path = loadPathLevels(
      b, pyramid, batch, head, feature, n, capacity, blockSize, fan, levels);
  // The path, bottom up: s = 0 + x_0, then s = x_j + s, divided once;
  // the leaf's keys loaded keysInFlight at a time (rows past its count
  // load its first key, added as +0).
  const int64_t inFlight = std::min(blockSize, keysInFlight);
  Value sum = buildLoop(
      b, zero, count, indexConst(b, inFlight), {zeroF},
      [&](ImplicitLocOpBuilder &lb, Value j0, ValueRange acc) {
        SmallVector<Value> chunk;
        for (int64_t u = 0; u < inFlight; ++u) {
          Value j = arith::AddIOp::create(lb, j0, indexConst(lb, u));
          Value real = cmp(lb, P::ult, j, count);
          Value at = arith::AddIOp::create(
              lb, first, arith::SelectOp::create(lb, real, j, zero));
          Value v =
              extractF32(lb, keys,
                         keyAt ? keyAt(lb, at, feature)
                               : SmallVector<Value>{batch, head, at, feature});
          chunk.push_back(arith::SelectOp::create(lb, real, v, zeroF));
        }
        Value s = acc[0];
        for (Value v : chunk)
          s = arith::AddFOp::create(lb, s, v);
        return SmallVector<Value>{s};
      })[0];
  Value value = meanOf(b, sum, count);
  memref::StoreOp::create(b, value, pyramid,
                          ValueRange{batch, head, leaf, feature});
  for (const PathLevel &level : path) {
    Value s = zeroF;
    for (Value v : level.siblings)
      s = arith::AddFOp::create(b, s, v);
    s = arith::AddFOp::create(b, s, value);
    value = meanOf(b, s, level.children);
    buildIfThen(b, level.exists, [&](ImplicitLocOpBuilder &wb) {
      memref::StoreOp::create(wb, value, pyramid,
                              ValueRange{batch, head, level.row, feature});
    });
  }
}

namespace {
/// One sequence's append as a block sees it: its cache, where this
/// thread works, and the keys [from, to = n) whose leaves (from firstLeaf
/// to leaves) and ancestors are recomputed.
struct AppendSite {
  Value keys, pyramid;
  RowBlock at;
  RowIndices keyAt;
  Value capacity, n, firstLeaf, leaves;
  int64_t blockSize = 0, fan = 0, levels = 0;
};
} // namespace

/// Whether the pages below `to` of the sequence lie in [0, P): the threads
/// split the table's entries (`stride` at a time), and the shared `flag`
/// records whether any is out of range.
static Value pagesInRange(ImplicitLocOpBuilder &b, const PagedKeys &paged,
                          Value flag, Value batch, Value to, Value capacity,
                          int64_t stride) {
  using P = arith::CmpIPredicate;
  Value zero32 = arith::ConstantIntOp::create(b, 0, 32);
  Value zero = indexConst(b, 0), tid = threadIdX(b);
  buildIfThen(b, cmp(b, P::eq, tid, zero), [&](ImplicitLocOpBuilder &ib) {
    memref::StoreOp::create(ib, zero32, flag, ValueRange{zero});
  });
  gpu::BarrierOp::create(b);
  Value pages = paged.pagesBelow(b, toIndex(b, to), capacity);
  Value numPages = dimOf(b, paged.pool, 0);
  buildLoop(b, tid, pages, indexConst(b, stride), {},
            [&](ImplicitLocOpBuilder &lb, Value i, ValueRange) {
              buildIfThen(lb, paged.outside(lb, batch, i, numPages),
                          [&](ImplicitLocOpBuilder &wb) {
                            memref::StoreOp::create(
                                wb, arith::ConstantIntOp::create(wb, 1, 32),
                                flag, ValueRange{zero});
                          });
              return SmallVector<Value>{};
            });
  gpu::BarrierOp::create(b);
  return cmp(b, P::eq, memref::LoadOp::create(b, flag, ValueRange{zero}),
             zero32);
}

/// Any append: the block's rows recompute the leaves from firstLeaf, then
/// level by level the nodes above them.
static void emitGeneralAppend(ImplicitLocOpBuilder &tb, const AppendSite &s) {
  using P = arith::CmpIPredicate;
  const RowBlock &at = s.at;
  Value cRows = indexConst(tb, at.rows.count), cFan = indexConst(tb, s.fan);
  Value cBlock = indexConst(tb, s.blockSize), one = indexConst(tb, 1);
  buildLoop(tb, arith::AddIOp::create(tb, s.firstLeaf, at.rows.row), s.leaves,
            cRows, {}, [&](ImplicitLocOpBuilder &lb, Value leaf, ValueRange) {
              Value first = arith::MulIOp::create(lb, leaf, cBlock);
              Value count = arith::MinUIOp::create(
                  lb, cBlock, arith::SubIOp::create(lb, s.n, first));
              emitMean(lb, s.keys, s.pyramid, at.batch, at.head, first, count,
                       leaf, at.rows.feature, s.keyAt);
              return SmallVector<Value>{};
            });
  gpu::BarrierOp::create(tb);
  // Level by level: where the child level starts and how many nodes it
  // has in the capacity's layout, how many it has for n keys, and the
  // first one recomputed.
  Value capLeaves = arith::CeilDivUIOp::create(tb, s.capacity, cBlock);
  buildLoop(
      tb, indexConst(tb, 0), indexConst(tb, s.levels),
      {indexConst(tb, 0), capLeaves, s.leaves, s.firstLeaf},
      [&](ImplicitLocOpBuilder &lb, Value, ValueRange st) {
        Value capOffset = st[0], capCount = st[1];
        Value childCount = st[2], firstChild = st[3];
        Value levelOffset = arith::AddIOp::create(lb, capOffset, capCount);
        Value size = arith::CeilDivUIOp::create(lb, childCount, cFan);
        Value first = arith::DivUIOp::create(lb, firstChild, cFan);
        // The level exists while its child level has more than one node.
        Value end = arith::SelectOp::create(
            lb, cmp(lb, P::ugt, childCount, one), size, indexConst(lb, 0));
        emitLevelNodes(lb, s.pyramid, at.batch, at.head, capOffset, childCount,
                       levelOffset, first, end, at.rows, s.fan);
        gpu::BarrierOp::create(lb);
        return SmallVector<Value>{
            levelOffset, arith::CeilDivUIOp::create(lb, capCount, cFan), size,
            first};
      });
}

void mlir::pisa::detail::emitPyramidAppend(ImplicitLocOpBuilder &b,
                                           const AppendOperands &ops,
                                           int64_t blockSize, int64_t fan,
                                           int64_t threads) {
  auto keysMem = cast<MemRefType>(ops.keys.getType());
  auto pyrMem = cast<MemRefType>(ops.pyramid.getType());
  auto tableMem = ops.blockTable ? cast<MemRefType>(ops.blockTable.getType())
                                 : MemRefType();
  const int64_t d = keysMem.getShape()[3];
  using P = arith::CmpIPredicate;
  AppendSite s;
  s.keys = ops.keys;
  s.pyramid = ops.pyramid;
  s.blockSize = blockSize;
  s.fan = fan;
  s.at = rowBlock(b, pyrMem.getShape()[1], d, threads);
  Value batch = s.at.batch, head = s.at.head;
  Value cBlock = indexConst(b, blockSize), one = indexConst(b, 1);
  const int64_t pageSize = tableMem ? keysMem.getShape()[1] : 0;
  s.capacity = tableMem ? indexConst(b, tableMem.getShape()[1] * pageSize)
                        : dimOf(b, ops.keys, 2);
  Value from = memref::LoadOp::create(b, ops.from, ValueRange{batch});
  Value to = memref::LoadOp::create(b, ops.to, ValueRange{batch});
  // 0 <= from < to <= Ncap, else the sequence's cache is left as it is
  // (uniform per block, so the barriers below are reached by all threads).
  Value zero32 = arith::ConstantIntOp::create(b, 0, 32);
  Value valid = arith::AndIOp::create(
      b,
      arith::AndIOp::create(b, cmp(b, P::sle, zero32, from),
                            cmp(b, P::slt, from, to)),
      cmp(b, P::ule, toIndex(b, to), s.capacity));
  if (tableMem) {
    // Pages below to[b] must lie in [0, P), else the cache is left as it is.
    PagedKeys paged{ops.blockTable, ops.keys, pageSize};
    valid =
        arith::AndIOp::create(b, valid,
                              pagesInRange(b, paged, ops.pageFlag, batch, to,
                                           s.capacity, s.at.rows.count * d));
    s.keyAt = [=](ImplicitLocOpBuilder &lb, Value j, Value e) {
      return paged.at(lb, batch, j, head, e);
    };
  }
  auto capShape =
      tableMem ? tableMem.getShape()[1] * pageSize : keysMem.getShape()[2];
  s.levels = maxUpperLevels(
      ShapedType::isDynamic(capShape) ? kMaxGPUKeys : capShape, blockSize, fan);
  s.n = toIndex(b, to);
  s.firstLeaf = arith::DivUIOp::create(b, toIndex(b, from), cBlock);
  s.leaves = arith::CeilDivUIOp::create(b, s.n, cBlock);
  // Keys in the last leaf only (a decode step): its path, in registers,
  // when the leaf's keys and the path's siblings fit them.
  const bool pathFits =
      blockSize <= kMaxPathLeafKeys && (fan - 1) * s.levels <= kMaxPathSiblings;
  Value lastLeafOnly =
      pathFits
          ? cmp(b, P::eq, arith::AddIOp::create(b, s.firstLeaf, one), s.leaves)
          : arith::ConstantIntOp::create(b, 0, 1).getResult();
  buildIfThen(b, arith::AndIOp::create(b, valid, lastLeafOnly),
              [&](ImplicitLocOpBuilder &tb) {
                buildIfThen(
                    tb, cmp(tb, P::eq, s.at.rows.row, indexConst(tb, 0)),
                    [&](ImplicitLocOpBuilder &rb) {
                      emitLastLeafAppend(rb, s.keys, s.pyramid, batch, head,
                                         s.at.rows.feature, s.firstLeaf, s.n,
                                         s.capacity, blockSize, fan, s.levels,
                                         pathKeysInFlight(threads), s.keyAt);
                    });
              });
  buildIfThen(b,
              arith::AndIOp::create(
                  b, valid,
                  arith::XOrIOp::create(b, lastLeafOnly,
                                        arith::ConstantIntOp::create(b, 1, 1))),
              [&](ImplicitLocOpBuilder &tb) { emitGeneralAppend(tb, s); });
}

/// The kernel of pisa.kernel.pyramid_append: block (0, batch x head) runs
/// emitPyramidAppend for its sequence and head.
static Kernel buildAppendKernel(PatternRewriter &rewriter, Operation *op,
                                MemRefType keysMem, MemRefType boundMem,
                                MemRefType tableMem, MemRefType pyrMem,
                                int64_t blockSize, int64_t fan,
                                KernelConfigAttr config) {
  SmallVector<KernelParam> params{
      {"keys", keysMem}, {"from", boundMem}, {"to", boundMem}};
  if (tableMem)
    params.push_back({"blockTable", tableMem});
  params.push_back({"pyramid", pyrMem});
  // A paged cache's page check combines the threads' verdicts here.
  SmallVector<Type> workgroup;
  if (tableMem)
    workgroup.push_back(
        workgroupType(rewriter.getContext(), {1}, rewriter.getI32Type()));
  Kernel kernel =
      createKernel(rewriter, op, "pyramid_append", params, workgroup);
  applyOccupancyHint(kernel.func(), config);
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  AppendOperands ops{kernel.arg("keys"), kernel.arg("from"), kernel.arg("to"),
                     kernel.arg("pyramid")};
  if (tableMem) {
    ops.blockTable = kernel.arg("blockTable");
    ops.pageFlag = kernel.func().getWorkgroupAttributions()[0];
  }
  emitPyramidAppend(b, ops, blockSize, fan, config.getThreads());
  gpu::ReturnOp::create(b);
  return kernel;
}

namespace {
/// pisa.kernel.pyramid_append: one launch, a block per (batch, KV head).
struct PyramidAppendKernelToGPU : OpRewritePattern<PyramidAppendKernelOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PyramidAppendKernelOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics())
      return rewriter.notifyMatchFailure(op, "expected the buffer form");
    auto keysMem = cast<MemRefType>(op.getKeys().getType());
    auto boundMem = cast<MemRefType>(op.getFrom().getType());
    if (boundMem != op.getTo().getType())
      return rewriter.notifyMatchFailure(op, "from and to of two types");
    auto pyrMem = cast<MemRefType>(op.getPyramid().getType());
    Value table = op.getBlockTable();
    auto tableMem = table ? cast<MemRefType>(table.getType()) : MemRefType();
    KernelConfigAttr config = getKernelConfig(op);
    Kernel kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      kernel =
          buildAppendKernel(rewriter, op, keysMem, boundMem, tableMem, pyrMem,
                            op.getBlockSize(), op.getBranching(), config);
    }
    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value groups = b.createOrFold<arith::MulIOp>(
        dimOf(b, table ? op.getPyramid() : op.getKeys(), 0),
        indexConst(b, pyrMem.getShape()[1]));
    SmallVector<KernelOperand> operands{{"keys", op.getKeys()},
                                        {"from", op.getFrom()},
                                        {"to", op.getTo()},
                                        {"pyramid", op.getPyramid()}};
    if (table)
      operands.push_back({"blockTable", table});
    launch(b, kernel, indexConst(b, 1), groups, config.getThreads(), operands);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::pisa::detail::populatePyramidAppendPatterns(
    RewritePatternSet &patterns) {
  patterns.add<PyramidAppendKernelToGPU>(patterns.getContext());
}
