//===- FuseDecodeAppend.cpp - --pisa-fuse-decode-append -------------------===//
//
// A decode step appends its new keys to the pyramid cache, then selects
// over it. Both kernels work per (batch, KV head), so one block can do
// both: the append's blocks are the selection's when the selection is a
// decode step's (a block of warps for its one query per batch x KV head)
// and both cover the same batch. The pass makes that decision on the IR,
// so the GPU conversion lowers one op to one kernel without looking at
// neighbours.
//
//===----------------------------------------------------------------------===//

#include "pisa/Analysis/GPUTarget.h"
#include "pisa/IR/PisaOps.h"
#include "pisa/Transforms/Passes.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::pisa {
#define GEN_PASS_DEF_PISAFUSEDECODEAPPEND
#include "pisa/Transforms/Passes.h.inc"
} // namespace mlir::pisa

using namespace mlir;
using namespace mlir::pisa;

/// What may sit between the append and the selection: ops that touch no
/// buffer, new allocations and the host's assertions.
static bool isNeutralBetween(Operation *op) {
  return isMemoryEffectFree(op) || isa<memref::AllocOp, cf::AssertOp>(op);
}

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}

/// The append `select` can run first in its blocks, or null.
static PyramidAppendKernelOp appendToFuse(SelectSingleStageKernelOp select) {
  if (!select.hasPureBufferSemantics() || !select.getCapacity() ||
      select.getTokenMajor())
    return nullptr;
  // One query per batch x KV head, on the decode block, whose threads
  // split the append's rows of d features.
  ArrayRef<int64_t> queries = shapeOf(select.getQueries());
  const int64_t d = queries[3];
  if (queries[2] != 1 || d < 1 || kDecodeBlockThreads % d != 0)
    return nullptr;
  Operation *op = select->getPrevNode();
  while (op && isNeutralBetween(op))
    op = op->getPrevNode();
  auto append = dyn_cast_or_null<PyramidAppendKernelOp>(op);
  if (!append || !append.hasPureBufferSemantics() || append.getBlockTable() ||
      append.getPyramid() != select.getPyramid() ||
      append.getBlockSize() != select.getBlockSize() ||
      append.getBranching() != select.getBranching() ||
      shapeOf(append.getKeys())[2] != int64_t(*select.getCapacity()))
    return nullptr;
  // The same batch: the append's blocks are the selection's.
  const int64_t batch = shapeOf(append.getKeys())[0];
  if (ShapedType::isDynamic(batch) ||
      batch != shapeOf(select.getSelection())[0])
    return nullptr;
  return append;
}

namespace {
struct PisaFuseDecodeAppendPass
    : public pisa::impl::PisaFuseDecodeAppendBase<PisaFuseDecodeAppendPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<std::pair<PyramidAppendKernelOp, SelectSingleStageKernelOp>>
        pairs;
    getOperation()->walk([&](SelectSingleStageKernelOp select) {
      if (PyramidAppendKernelOp append = appendToFuse(select))
        pairs.push_back({append, select});
    });
    IRRewriter rewriter(&getContext());
    for (auto [append, select] : pairs) {
      rewriter.setInsertionPoint(select);
      AppendSelectSingleStageKernelOp::create(
          rewriter, select.getLoc(), TypeRange{}, select.getQueries(),
          select.getKeys(), select.getPyramid(), select.getQueryOffset(),
          append.getKeys(), append.getFrom(), append.getTo(),
          select.getSelection(), select.getTopk(), select.getBlockSize(),
          select.getBranching(), select.getScale(), *select.getCapacity());
      rewriter.eraseOp(select);
      rewriter.eraseOp(append);
    }
  }
};
} // namespace
