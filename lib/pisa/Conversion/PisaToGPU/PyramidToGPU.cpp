//===- PyramidToGPU.cpp - pisa.kernel.pyramid to gpu kernels --------------===//
//
// One block per (node, batch x KV head), one thread per feature: the leaf
// kernel averages a block of raw keys, the level kernel (launched once per
// upper level, with the level's offsets as arguments) averages g children
// of the packed pyramid. Both accumulate in f32; reads are coalesced across
// the feature dimension.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "../Common/LevelLayout.h"
#include "../Common/LoopBuilders.h"

#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

/// Stores mean(src[b, h, base + c, e] for c < count) to dst[b, h, row, e].
static void emitMean(ImplicitLocOpBuilder &b, Value src, Value dst,
                     Value batch, Value head, Value base, Value count,
                     Value row, Value feature) {
  Value zero = indexConst(b, 0);
  auto sum = buildLoop(
      b, zero, count, {f32Const(b, 0.0f)},
      [&](ImplicitLocOpBuilder &lb, Value c, ValueRange acc) {
        Value v = extractF32(lb, src,
                             {batch, head, arith::AddIOp::create(lb, base, c),
                              feature});
        return SmallVector<Value>{arith::AddFOp::create(lb, acc[0], v)};
      });
  Value n = arith::UIToFPOp::create(
      b, b.getF32Type(),
      arith::IndexCastUIOp::create(b, b.getI64Type(), count));
  memref::StoreOp::create(b, arith::DivFOp::create(b, sum[0], n), dst,
                          ValueRange{batch, head, row, feature});
}

namespace {
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
    Type index = rewriter.getIndexType();

    Kernel leafKernel, levelKernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      leafKernel = createKernel(rewriter, op, "pyramid_leaves",
                                {{"keys", keysMem}, {"pyramid", pyrMem}});
      ImplicitLocOpBuilder kb(loc, rewriter);
      Value leaf = blockIdX(kb), bh = blockIdY(kb), e = threadIdX(kb);
      Value heads = indexConst(kb, numHeads);
      Value batch = arith::DivUIOp::create(kb, bh, heads);
      Value head = arith::RemUIOp::create(kb, bh, heads);
      Value cBlock = indexConst(kb, blockSize);
      Value first = arith::MulIOp::create(kb, leaf, cBlock);
      Value numKeys = dimOf(kb, leafKernel.arg("keys"), 2);
      Value count = arith::MinUIOp::create(
          kb, cBlock, arith::SubIOp::create(kb, numKeys, first));
      emitMean(kb, leafKernel.arg("keys"), leafKernel.arg("pyramid"), batch,
               head, first, count, leaf, e);
      gpu::ReturnOp::create(kb);

      levelKernel = createKernel(rewriter, op, "pyramid_level",
                                 {{"pyramid", pyrMem},
                                  {"childOffset", index},
                                  {"levelOffset", index},
                                  {"childCount", index}});
      ImplicitLocOpBuilder lb(loc, rewriter);
      Value node = blockIdX(lb), lbh = blockIdY(lb), le = threadIdX(lb);
      Value lheads = indexConst(lb, numHeads);
      Value lbatch = arith::DivUIOp::create(lb, lbh, lheads);
      Value lhead = arith::RemUIOp::create(lb, lbh, lheads);
      Value srcOffset = levelKernel.arg("childOffset");
      Value dstOffset = levelKernel.arg("levelOffset");
      Value srcCount = levelKernel.arg("childCount");
      Value cFan = indexConst(lb, fan);
      Value firstChild = arith::MulIOp::create(lb, node, cFan);
      Value children = arith::MinUIOp::create(
          lb, cFan, arith::SubIOp::create(lb, srcCount, firstChild));
      emitMean(lb, levelKernel.arg("pyramid"), levelKernel.arg("pyramid"),
               lbatch, lhead,
               arith::AddIOp::create(lb, srcOffset, firstChild), children,
               arith::AddIOp::create(lb, dstOffset, node), le);
      gpu::ReturnOp::create(lb);
    }

    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder b(loc, rewriter);
    Value keys = op.getKeys(), pyramid = op.getPyramid();
    LevelLayout layout(b, dimOf(b, keys, 2), blockSize, fan);
    Value batch = dimOf(b, keys, 0);
    Value groups = b.createOrFold<arith::MulIOp>(batch, indexConst(b, numHeads));
    launch(b, leafKernel, layout.numLeaves(), groups, d,
           {{"keys", keys}, {"pyramid", pyramid}});
    if (const std::optional<PyramidLayout> &fixed = layout.fixed()) {
      for (int64_t l = 2; l <= fixed->numLevels(); ++l)
        launch(b, levelKernel, indexConst(b, fixed->size(l)), groups, d,
               {{"pyramid", pyramid},
                {"childOffset", indexConst(b, fixed->offset(l - 1))},
                {"levelOffset", indexConst(b, fixed->offset(l))},
                {"childCount", indexConst(b, fixed->size(l - 1))}});
    } else {
      // Level by level upwards: level l has ceil(M_{l-1} / g) nodes and
      // starts where level l - 1 ends.
      buildLoop(
          b, indexConst(b, 1), layout.numLevels(),
          {indexConst(b, 0), layout.numLeaves()},
          [&](ImplicitLocOpBuilder &lb, Value, ValueRange st) {
            Value levelOffset = arith::AddIOp::create(lb, st[0], st[1]);
            Value size =
                arith::CeilDivUIOp::create(lb, st[1], indexConst(lb, fan));
            launch(lb, levelKernel, size, groups, d,
                   {{"pyramid", pyramid},
                    {"childOffset", st[0]},
                    {"levelOffset", levelOffset},
                    {"childCount", st[1]}});
            return SmallVector<Value>{levelOffset, size};
          });
    }
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void mlir::pisa::populatePyramidKernelToGPUPatterns(RewritePatternSet &patterns) {
  patterns.add<PyramidKernelToGPU>(patterns.getContext());
}
