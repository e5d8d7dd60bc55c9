//===- TileScoringMMA.cpp - Stage-2 tile scoring on tensor cores ----------===//
//
// For bf16 inputs the tile product (Q_tile * G rows of queries) x d x C keys
// runs on tensor cores with mma.sync m16n8k16 (bf16 x bf16 -> f32): warp w
// owns rows 16w .. 16w+15, A fragments come straight from the query rows in
// global memory, B fragments from the leaf's key tile in shared memory (kept
// in bf16, so nothing is rounded that the inputs did not already round).
// Each row's LSE over the C keys (masked by its query's position) is reduced
// across the quad of lanes that share the row; heads are then summed as in
// the SIMT kernel.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 .bf16): with g = lane / 4 and
// i = lane % 4, A holds (row g | g+8, cols 2i, 2i+1 | +8), B holds (k = 2i,
// 2i+1 | +8, col g), C holds (row g | g+8, cols 2i, 2i+1).
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "TileScoring.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::pisa::detail;

bool mlir::pisa::detail::canScoreWithMma(const TileProblem &p) {
  const int64_t rows = p.qTile * p.groupSize, c = p.layout.blockSize();
  return p.keys.getElementType().isBF16() && rows % 16 == 0 &&
         rows / 16 <= 32 && c % 8 == 0 && c <= 128 && p.headDim % 16 == 0 &&
         c * p.headDim * 2 <= 32 * 1024;
}

int64_t mlir::pisa::detail::mmaScoreThreads(const TileProblem &p) {
  return p.qTile * p.groupSize / 16 * 32;
}

/// Two consecutive bf16 of `mem` at `indices` packed into one i32.
static Value loadPair(ImplicitLocOpBuilder &b, Value mem, ValueRange indices) {
  Type bf16 = b.getBF16Type();
  Value pair = vector::LoadOp::create(b, VectorType::get({2}, bf16), mem,
                                      indices, /*nontemporal=*/false,
                                      llvm::MaybeAlign(4));
  Value word = vector::BitCastOp::create(
      b, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, word, ArrayRef<int64_t>{0});
}

static Value quadReduce(ImplicitLocOpBuilder &b, Value v, bool isMax) {
  Value width = arith::ConstantIntOp::create(b, 32, 32);
  for (int64_t offset : {1, 2}) {
    Value other = gpu::ShuffleOp::create(
                      b, v, arith::ConstantIntOp::create(b, offset, 32), width,
                      gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    v = isMax ? arith::MaximumFOp::create(b, v, other).getResult()
              : arith::AddFOp::create(b, v, other).getResult();
  }
  return v;
}

gpu::GPUFuncOp mlir::pisa::detail::buildMmaScoreKernel(
    PatternRewriter &rewriter, Operation *anchor, const TileProblem &p) {
  OpBuilder::InsertionGuard guard(rewriter);
  MLIRContext *ctx = rewriter.getContext();
  Type index = rewriter.getIndexType(), f32 = rewriter.getF32Type();
  const SortBuffers &s = p.sort;
  const int64_t d = p.headDim, blockSize = p.layout.blockSize();
  const int64_t threads = mmaScoreThreads(p), rowsTotal = p.qTile * p.groupSize;
  const int64_t nTiles = blockSize / 8, kSteps = d / 16;

  auto kernel = createKernel(
      rewriter, anchor, "select_stage2_score_tiles_mma",
      {p.queries, p.keys, index, s.leafCount, s.leafStart, s.tileLeaf,
       s.tileFirst, s.numTiles, s.sortedPairs, p.scores},
      {workgroupType(ctx, {blockSize, d}, p.keys.getElementType()),
       workgroupType(ctx, {threads}, f32)});
  kernel.setWorkgroupAttributionAttr(0, LLVM::LLVMDialect::getAlignAttrName(),
                                     rewriter.getI64IntegerAttr(16));
  ImplicitLocOpBuilder b(anchor->getLoc(), rewriter);
  Block &e = kernel.getBody().front();
  Value keyTile = kernel.getWorkgroupAttributions()[0];
  Value rowLse = kernel.getWorkgroupAttributions()[1];
  auto toIndex = [](ImplicitLocOpBuilder &lb, Value v) -> Value {
    return arith::IndexCastOp::create(lb, lb.getIndexType(), v);
  };
  auto load = [](ImplicitLocOpBuilder &lb, Value mem, ValueRange idx) -> Value {
    return memref::LoadOp::create(lb, mem, idx);
  };
  Value heads = indexConst(b, p.kvHeads);
  Value batch = arith::DivUIOp::create(b, blockIdY(b), heads);
  Value kv = arith::RemUIOp::create(b, blockIdY(b), heads);
  Value tile = blockIdX(b), tid = threadIdX(b);
  Value zero = indexConst(b, 0);
  Value numTiles = toIndex(b, load(b, e.getArgument(7), {batch, kv}));

  buildIfThen(b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, tile,
                                       numTiles),
              [&](ImplicitLocOpBuilder &tb) {
    TileSpan span = loadTileSpan(tb, e, batch, kv, tile, p.qTile);
    Value leaf = span.leaf, first = span.first, n = span.size;
    Value g = indexConst(tb, p.groupSize);
    Value keyBase = arith::MulIOp::create(tb, leaf, indexConst(tb, blockSize));
    Value numKeys = indexConst(tb, p.numKeys);

    // The leaf's keys, in bf16, zeros past N.
    auto copy = scf::ForOp::create(tb, tid, indexConst(tb, blockSize * d),
                                   indexConst(tb, threads));
    {
      OpBuilder::InsertionGuard g2(tb);
      tb.setInsertionPointToStart(copy.getBody());
      Value idx = copy.getInductionVar();
      Value r = arith::DivUIOp::create(tb, idx, indexConst(tb, d));
      Value c = arith::RemUIOp::create(tb, idx, indexConst(tb, d));
      Value j = arith::AddIOp::create(tb, keyBase, r);
      Value inKeys = arith::CmpIOp::create(tb, arith::CmpIPredicate::ult, j,
                                           numKeys);
      Value v = buildIf(
          tb, inKeys, {tb.getBF16Type()},
          [&](ImplicitLocOpBuilder &ib) {
            return SmallVector<Value>{
                memref::LoadOp::create(ib, e.getArgument(1),
                                       ValueRange{batch, kv, j, c})
                    .getResult()};
          },
          [&](ImplicitLocOpBuilder &ib) {
            return SmallVector<Value>{
                arith::ConstantOp::create(ib, ib.getZeroAttr(ib.getBF16Type()))
                    .getResult()};
          })[0];
      memref::StoreOp::create(tb, v, keyTile, ValueRange{r, c});
    }
    gpu::BarrierOp::create(tb);

    // This lane's two rows: (query, head, visible-key limit) each.
    Value lane = arith::RemUIOp::create(tb, tid, indexConst(tb, 32));
    Value warp = arith::DivUIOp::create(tb, tid, indexConst(tb, 32));
    Value gid = arith::DivUIOp::create(tb, lane, indexConst(tb, 4));
    Value tig = arith::RemUIOp::create(tb, lane, indexConst(tb, 4));
    struct Row {
      Value index, query, head, limit;
    };
    auto rowOf = [&](Value r) {
      Value member = arith::DivUIOp::create(tb, r, g);
      Value active =
          arith::CmpIOp::create(tb, arith::CmpIPredicate::ult, member, n);
      TileMember row = loadTileMember(tb, e, p, batch, kv, first, member);
      Value limit = row.limit;
      // Inactive rows see no key: their LSE is -inf and never read.
      limit = arith::SelectOp::create(tb, active, limit, zero);
      Value head = arith::AddIOp::create(tb, arith::MulIOp::create(tb, kv, g),
                                         arith::RemUIOp::create(tb, r, g));
      return Row{r, row.query, head, limit};
    };
    Value r0 = arith::AddIOp::create(
        tb, arith::MulIOp::create(tb, warp, indexConst(tb, 16)), gid);
    Row rows[2] = {rowOf(r0),
                   rowOf(arith::AddIOp::create(tb, r0, indexConst(tb, 8)))};

    // Accumulate the (16 x C) slab over d in 16-wide steps.
    Type accType = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
    Value zeroF = f32Const(tb, 0.0f);
    SmallVector<Value> init(nTiles * 4, zeroF);
    Value col = arith::MulIOp::create(tb, tig, indexConst(tb, 2));
    auto acc = buildLoop(
        tb, zero, indexConst(tb, kSteps), init,
        [&](ImplicitLocOpBuilder &lb, Value step, ValueRange c) {
          Value k0 = arith::MulIOp::create(lb, step, indexConst(lb, 16));
          Value kLo = arith::AddIOp::create(lb, k0, col);
          Value kHi = arith::AddIOp::create(lb, kLo, indexConst(lb, 8));
          auto aFrag = [&](const Row &row, Value k) {
            return loadPair(lb, e.getArgument(0),
                            {batch, row.head, row.query, k});
          };
          SmallVector<Value> a{aFrag(rows[0], kLo), aFrag(rows[1], kLo),
                               aFrag(rows[0], kHi), aFrag(rows[1], kHi)};
          SmallVector<Value> next;
          for (int64_t nt = 0; nt < nTiles; ++nt) {
            Value key = arith::AddIOp::create(lb, gid, indexConst(lb, nt * 8));
            SmallVector<Value> bFrag{loadPair(lb, keyTile, {key, kLo}),
                                     loadPair(lb, keyTile, {key, kHi})};
            SmallVector<Value> cFrag(c.begin() + nt * 4,
                                     c.begin() + nt * 4 + 4);
            Value d4 = NVVM::MmaOp::create(
                lb, accType, a, bFrag, cFrag, {16, 8, 16}, std::nullopt,
                std::nullopt,
                std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16,
                                              NVVM::MMATypes::bf16},
                std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                               NVVM::MMALayout::col});
            for (int64_t i = 0; i < 4; ++i)
              next.push_back(LLVM::ExtractValueOp::create(
                  lb, d4, ArrayRef<int64_t>{i}));
          }
          return next;
        });

    // Row LSE over the visible keys: lane-local, then over the quad.
    Value negInf = f32Const(tb, -std::numeric_limits<float>::infinity());
    Value scale = f32Const(tb, p.scale);
    for (int64_t half = 0; half < 2; ++half) {
      SmallVector<Value> logits;
      Value m = negInf;
      for (int64_t nt = 0; nt < nTiles; ++nt)
        for (int64_t i = 0; i < 2; ++i) {
          Value key = arith::AddIOp::create(
              tb, keyBase,
              arith::AddIOp::create(tb, col, indexConst(tb, nt * 8 + i)));
          Value ok = arith::CmpIOp::create(tb, arith::CmpIPredicate::ult, key,
                                           rows[half].limit);
          Value x = arith::SelectOp::create(
              tb, ok,
              arith::MulFOp::create(tb, acc[nt * 4 + half * 2 + i], scale),
              negInf);
          logits.push_back(x);
          m = arith::MaximumFOp::create(tb, m, x);
        }
      m = quadReduce(tb, m, /*isMax=*/true);
      Value empty =
          arith::CmpFOp::create(tb, arith::CmpFPredicate::OEQ, m, negInf);
      Value safeM = arith::SelectOp::create(tb, empty, zeroF, m);
      Value sum = zeroF;
      for (Value x : logits)
        sum = arith::AddFOp::create(
            tb, sum,
            math::ExpOp::create(tb, arith::SubFOp::create(tb, x, safeM)));
      sum = quadReduce(tb, sum, /*isMax=*/false);
      Value lse = arith::AddFOp::create(tb, m, math::LogOp::create(tb, sum));
      buildIfThen(tb,
                  arith::CmpIOp::create(tb, arith::CmpIPredicate::eq, tig, zero),
                  [&](ImplicitLocOpBuilder &wb) {
                    memref::StoreOp::create(wb, lse, rowLse,
                                            ValueRange{rows[half].index});
                  });
    }
    gpu::BarrierOp::create(tb);

    // Sum the G heads of each query of the tile.
    Value member = arith::DivUIOp::create(tb, tid, g);
    Value writer = arith::AndIOp::create(
        tb,
        arith::CmpIOp::create(tb, arith::CmpIPredicate::ult, tid,
                              indexConst(tb, rowsTotal)),
        arith::AndIOp::create(
            tb, arith::CmpIOp::create(tb, arith::CmpIPredicate::ult, member, n),
            arith::CmpIOp::create(tb, arith::CmpIPredicate::eq,
                                  arith::RemUIOp::create(tb, tid, g), zero)));
    buildIfThen(tb, writer, [&](ImplicitLocOpBuilder &wb) {
      TileMember scored = loadTileMember(wb, e, p, batch, kv, first, member);
      Value query = scored.query, slot = scored.slot;
      Value u = buildLoop(wb, zero, g, {zeroF},
                          [&](ImplicitLocOpBuilder &hb, Value h, ValueRange a) {
                            Value v = memref::LoadOp::create(
                                hb, rowLse,
                                ValueRange{arith::AddIOp::create(hb, tid, h)});
                            return SmallVector<Value>{
                                arith::AddFOp::create(hb, a[0], v)};
                          })[0];
      memref::StoreOp::create(wb, u, e.getArgument(9),
                              ValueRange{batch, kv, query, slot});
    });
  });
  gpu::ReturnOp::create(b);
  return kernel;
}
