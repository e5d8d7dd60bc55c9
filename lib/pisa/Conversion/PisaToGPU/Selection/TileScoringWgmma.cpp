//===- TileScoringWgmma.cpp - Stage-2 tile scoring on warpgroup MMA -------===//
//
// sm_90a: a block is one warpgroup (4 warps) and scores a 64-row tile
// (Q_tile queries x G heads) against its leaf's C keys with wgmma
// m64nCk16, both operands read by the tensor cores from shared memory
// through matrix descriptors, the 64 x C product left in the warpgroup's
// registers. Against the mma.sync scorer (TileScoringMMA.cpp) no warp reads
// operand fragments out of shared memory itself: each key tile is read once
// a tile instead of once per warp, the query rows are copied in by cp.async
// without passing through registers, and the tensor cores take a
// warpgroup's 64 rows at once.
//
// Tiles are stored K-major in the 128-byte swizzle: 64 columns a 128-byte
// row, the 16-byte chunk c of row r at position c ^ (r % 8). Consecutive
// threads copy consecutive chunks of a row (whole rows from global memory)
// and the eight chunks of a row land in distinct bank groups. (Unswizzled
// 8 x 16-byte core matrices measured 1.4x slower than mma.sync, Nsight
// Compute's Mem Busy at 90%; CHANGELOG.md's performance history.) A block keeps
// one query tile: copying the next tile's queries into a second buffer while
// the current one is scored measured 9% slower at 256K, since the 16 KiB more
// shared memory cost two blocks an SM (4 instead of 6) and the kernel is
// bound by issue and latency (CHANGELOG.md's performance history).
//
// The accumulators are read where wgmma leaves them (warp w holds rows
// 16 w + lane / 4 and that + 8; the quad's lanes split each row's columns)
// and the per-row LSE (base 2, the scale folded in) and the head sums are
// quad and warp shuffles, as in the mma.sync scorer's register epilogue.
//
// wgmma has no vector.contract lowering that leaves its accumulators in
// registers for such an epilogue (nvgpu.warpgroup.mma's accumulator is
// opaque until stored to memory), so this kernel states the product with
// the NVVM ops directly; docs/gpu.md says so.
//
//===----------------------------------------------------------------------===//

#include "Kernels/KernelBuilder.h"
#include "Kernels/TileCopy.h"
#include "Kernels/WarpgroupMma.h"
#include "Selection/LeafScoreMMA.h"
#include "Selection/TileScoring.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::pisa::detail;

namespace {
constexpr int64_t kRegistersPerSM = 64 * 1024;

/// The block's shared memory: the query tile (64 x d), then the key tile
/// (C x d), both in the 128-byte swizzle (copyTile).
struct WgmmaTileLayout {
  int64_t keyOffset, bytes;
  explicit WgmmaTileLayout(const TileProblem &p)
      : keyOffset(kWarpgroupRows * p.headDim * 2),
        bytes(keyOffset + p.blockSize * p.headDim * 2) {}
};

/// Where a tile row comes from: the global memref, the indices of the row's
/// first element (the last index is the column) and how many of a copy's
/// elements are real (8, or 0 to zero-fill).
struct RowSource {
  Value memref;
  SmallVector<Value> at;
  Value real;
};
} // namespace

std::optional<std::string>
mlir::pisa::detail::wgmmaScoreUnsupported(const TileProblem &p) {
  Type elem = p.keys.getElementType();
  const int64_t g = p.groupSize;
  auto why = [](const Twine &t) { return std::optional(t.str()); };
  if (!elem.isBF16() && !elem.isF16())
    return why("wgmma scores f16 or bf16 keys");
  if (p.qTile * g != kWarpgroupRows)
    return why("wgmma needs Q_tile x G = 64 but it is " + Twine(p.qTile * g));
  // The epilogue also handles G = 1, 2 and 4 (Q_tile 64, 32, 16); only G =
  // 8 and 16 have been checked on the H200, so the others keep mma.sync.
  if (g != 8 && g != 16)
    return why("wgmma takes G = 8 or 16 but G is " + Twine(g));
  if (p.blockSize % 8 || p.blockSize > kWgmmaMaxN)
    return why("wgmma needs C a multiple of 8 up to " + Twine(kWgmmaMaxN));
  if (p.headDim % kSwizzleColumns)
    return why("wgmma needs d a multiple of " + Twine(kSwizzleColumns));
  if (WgmmaTileLayout(p).bytes > kStaticSharedBytes)
    return why("the staged tiles take " + Twine(WgmmaTileLayout(p).bytes) +
               " bytes, over the 48 KiB of static shared memory");
  return std::nullopt;
}

int64_t mlir::pisa::detail::wgmmaScoreThreads() { return kWarpgroupThreads; }

/// Copies rows [0, rows) of a tile into buffer `buffer` of `tiles`
/// ([buffers, d / 64, R, 8, 8]: 128-byte rows of 64 columns, the 16-byte
/// chunk c of row r at c ^ (r % 8), the 128-byte swizzle) by cp.async, 16
/// bytes a copy, and commits them as one group. Consecutive threads take
/// consecutive chunks of a row: whole rows from global memory, and the
/// eight chunks of a row land in eight different bank groups. The copies
/// bypass L1 (.cg): a block reads each query row once, and that measured
/// 2-4% faster than through L1.
static Value
copyTile(ImplicitLocOpBuilder &b, Value tid, Value tiles, Value buffer,
         int64_t rows, int64_t d,
         llvm::function_ref<RowSource(ImplicitLocOpBuilder &, Value)> source) {
  ChunkedTile tile{rows, d, kWarpgroupThreads};
  auto chunkAt = [&](ImplicitLocOpBuilder &cb, Value i) -> AsyncChunk {
    Value row = tile.row(cb, i);
    Value col = tile.chunkInRow(cb, i);
    SmallVector<Value> dstAt{buffer};
    llvm::append_range(dstAt, swizzledChunkIndices(cb, row, col));
    RowSource src = source(cb, row);
    SmallVector<Value> at(src.at);
    at.back() = arith::AddIOp::create(
        cb, at.back(),
        arith::MulIOp::create(cb, col, indexConst(cb, kChunkElems)));
    return {tiles, dstAt, src.memref, at, src.real};
  };
  return asyncCopyChunks(b, tile, tid, chunkAt, /*bypassL1=*/true,
                         /*chunksFirst=*/true);
}

/// The score of each member of the tile from the warpgroup's 64 x C
/// product (`acc`, C / 2 f32 a thread): per row the LSE over the C keys
/// (base 2, the scale folded in) across the quad, per member the sum over
/// its G rows across the warp, written by one lane for members < n. No key
/// mask: stage 2 scores contenders only, leaves at most b_t - 2, so every
/// key of the leaf exists and every query of the tile sees it.
static void buildWarpgroupEpilogue(ImplicitLocOpBuilder &b, const Kernel &e,
                                   const TileProblem &p, Value acc, Value tid,
                                   Value batch, Value kv,
                                   const TileSpan &span) {
  const int64_t c = p.blockSize, G = p.groupSize;
  Value lane = arith::RemUIOp::create(b, tid, indexConst(b, 32));
  Value warp = arith::DivUIOp::create(b, tid, indexConst(b, 32));
  Value quadRow = arith::DivUIOp::create(b, lane, indexConst(b, 4));
  Value scale = f32Const(b, p.scale * kLog2E);
  // Accumulator 4 j + e: row 16 w + lane / 4 + 8 (e / 2), column
  // 8 j + 2 (lane % 4) + e % 2.
  Value lse[2];
  for (int64_t half = 0; half < 2; ++half) {
    SmallVector<Value> products;
    for (int64_t j = 0; j < c / 8; ++j)
      for (int64_t e2 = 0; e2 < 2; ++e2)
        products.push_back(LLVM::ExtractValueOp::create(
            b, acc, ArrayRef<int64_t>{4 * j + 2 * half + e2}));
    lse[half] = quadScaledRowLse(b, products, scale);
  }
  // A member's G rows: G consecutive quad rows (G <= 8) or both halves of
  // the warp's 8 (G = 16). Lanes 4 apart hold consecutive quad rows.
  const int64_t span8 = std::min<int64_t>(G, 8);
  const int64_t halves = G == 16 ? 1 : 2;
  if (G == 16)
    lse[0] = arith::AddFOp::create(b, lse[0], lse[1]);
  for (int64_t half = 0; half < halves; ++half) {
    SmallVector<int64_t> quadRows;
    for (int64_t m = 1; m < span8; m *= 2)
      quadRows.push_back(4 * m);
    Value total = toBaseE(b, laneSum(b, lse[half], quadRows));
    Value row = arith::AddIOp::create(
        b, arith::MulIOp::create(b, warp, indexConst(b, 16)),
        arith::AddIOp::create(b, quadRow, indexConst(b, 8 * half)));
    Value member = arith::DivUIOp::create(b, row, indexConst(b, G));
    Value writes = arith::AndIOp::create(
        b,
        cmp(b, arith::CmpIPredicate::eq,
            arith::RemUIOp::create(b, lane, indexConst(b, 4 * span8)),
            indexConst(b, 0)),
        cmp(b, arith::CmpIPredicate::ult, member, span.size));
    buildIfThen(b, writes, [&](ImplicitLocOpBuilder &wb) {
      TileMember scored = loadTileMember(wb, e, p, batch, kv, span, member);
      memref::StoreOp::create(wb, total, e.arg("scores"),
                              ValueRange{batch, kv, scored.query, scored.slot});
    });
  }
}

int64_t mlir::pisa::detail::wgmmaScoreBlocksPerSM(const TileProblem &p) {
  const WgmmaTileLayout l(p);
  const int64_t d = p.headDim, c = p.blockSize;
  // As many blocks per SM as shared memory allows, but no more than leave
  // each thread the C / 2 accumulators and 48 registers besides, 80 for
  // d > 128 (its copies' addresses). ptxas 13 then spills nothing for the C,
  // d and G the tile layout admits (C = 64, d = 128: 79 registers at six
  // blocks) but 4 bytes at C = 32, d = 192, G = 16 (32 at six blocks);
  // C = 128 needs about 96 (it refuses wgmma with 85): four blocks.
  const int64_t registers = c / 2 + (d > 128 ? 80 : 48);
  const int64_t byRegisters = kRegistersPerSM / (kWarpgroupThreads * registers);
  const int64_t hint = std::clamp<int64_t>(
      std::min(blocksBySharedMemory(l.bytes), byRegisters), 1, 8);
  return hint;
}

namespace {
/// The wgmma scorer's kernel: the tiles staged by cp.async in the 128-byte
/// swizzle, one warpgroup product a tile, the next tile's copies issued
/// under this tile's epilogue.
class WgmmaScoreKernelBuilder {
public:
  WgmmaScoreKernelBuilder(PatternRewriter &rewriter, const TileProblem &p)
      : p(p), l(p), ctx(rewriter.getContext()), f32(rewriter.getF32Type()),
        elem(p.keys.getElementType()), d(p.headDim), c(p.blockSize),
        G(p.groupSize) {}

  Kernel build(PatternRewriter &rewriter, Operation *anchor);

private:
  /// The query and key tiles in the block's shared memory, and their
  /// wgmma descriptors.
  void carveTiles(ImplicitLocOpBuilder &b);
  /// Copies the query rows (member * G + head) of the tile `span` into
  /// the query tile. Idle members copy a clamped row that no result reads.
  void copyQueries(ImplicitLocOpBuilder &qb, const TileSpan &span);
  /// Copies a tile's operands: its keys unless the previous tile had the
  /// same leaf (`previousLeaf`), then its queries, as cp.async groups.
  void copyOperands(ImplicitLocOpBuilder &cb, const TileSpan &span,
                    Value previousLeaf);
  /// The warpgroup's 64 x C product of the staged tiles.
  Value tileProduct(ImplicitLocOpBuilder &tb);
  /// One tile: wait for its operands, its product, the next tile's copies,
  /// its epilogue.
  void buildTile(ImplicitLocOpBuilder &tb, Value tile, Value endTile);

  const TileProblem &p;
  const WgmmaTileLayout l;
  MLIRContext *ctx;
  Type f32, elem;
  const int64_t d, c, G;
  Kernel e;
  Value queryTile, keyTile, queryDesc, keyDesc;
  Value batch, kv, tid, g;
};
} // namespace

void WgmmaScoreKernelBuilder::carveTiles(ImplicitLocOpBuilder &b) {
  Value bytes = e.func().getWorkgroupAttributions()[0];
  auto swizzledTiles = [&](int64_t offset, int64_t buffers, int64_t rows) {
    return memref::ViewOp::create(b,
                                  workgroupType(ctx,
                                                {buffers, d / kSwizzleColumns,
                                                 rows, 8, kChunkElems},
                                                elem),
                                  bytes, indexConst(b, offset), ValueRange{})
        .getResult();
  };
  queryTile = swizzledTiles(0, 1, kWarpgroupRows);
  keyTile = swizzledTiles(l.keyOffset, 1, c);
  Value base = arith::IndexCastOp::create(
      b, b.getI64Type(),
      memref::ExtractAlignedPointerAsIndexOp::create(b, bytes));
  queryDesc = kMajorDescriptor(b, base);
  keyDesc = kMajorDescriptor(
      b, arith::AddIOp::create(
             b, base, arith::ConstantIntOp::create(b, l.keyOffset, 64)));
}

void WgmmaScoreKernelBuilder::copyQueries(ImplicitLocOpBuilder &qb,
                                          const TileSpan &span) {
  copyTile(qb, tid, queryTile, indexConst(qb, 0), kWarpgroupRows, d,
           [&](ImplicitLocOpBuilder &lb, Value r) -> RowSource {
             Value head =
                 arith::AddIOp::create(lb, arith::MulIOp::create(lb, kv, g),
                                       arith::RemUIOp::create(lb, r, g));
             TileMember m = loadTileMember(lb, e, p, batch, kv, span,
                                           arith::DivUIOp::create(lb, r, g));
             return {e.arg("queries"),
                     {batch, head, m.query, indexConst(lb, 0)},
                     indexConst(lb, kChunkElems)};
           });
}

void WgmmaScoreKernelBuilder::copyOperands(ImplicitLocOpBuilder &cb,
                                           const TileSpan &span,
                                           Value previousLeaf) {
  Value newLeaf = cmp(cb, arith::CmpIPredicate::ne, span.leaf, previousLeaf);
  buildIfThen(cb, newLeaf, [&](ImplicitLocOpBuilder &kb) {
    Value lastKey = arith::SubIOp::create(kb, span.numKeys, indexConst(kb, 1));
    copyTile(kb, tid, keyTile, indexConst(kb, 0), c, d,
             [&](ImplicitLocOpBuilder &lb, Value r) -> RowSource {
               Value key = arith::AddIOp::create(lb, span.firstKey, r);
               Value row = arith::AddIOp::create(
                   lb, span.keyShift, arith::MinUIOp::create(lb, key, lastKey));
               Value real = arith::SelectOp::create(
                   lb, cmp(lb, arith::CmpIPredicate::ule, key, lastKey),
                   indexConst(lb, kChunkElems), indexConst(lb, 0));
               return {
                   e.arg("keys"), {batch, kv, row, indexConst(lb, 0)}, real};
             });
  });
  copyQueries(cb, span);
}

Value WgmmaScoreKernelBuilder::tileProduct(ImplicitLocOpBuilder &tb) {
  return warpgroupProduct(tb, elem, c, d, {queryDesc, false, kWarpgroupRows},
                          {keyDesc, false, c}, Value());
}

void WgmmaScoreKernelBuilder::buildTile(ImplicitLocOpBuilder &tb, Value tile,
                                        Value endTile) {
  TileSpan span = loadTileSpan(tb, e, p, batch, kv, tile);
  // This tile's groups complete. cp.async wrote through the generic proxy;
  // wgmma reads through the async proxy.
  NVVM::CpAsyncWaitGroupOp::create(tb, 0);
  NVVM::FenceProxyOp::create(
      tb, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  gpu::BarrierOp::create(tb);
  Value acc = tileProduct(tb);
  // Every warp's product is done with both tiles: the next tile's operands
  // may overwrite them.
  gpu::BarrierOp::create(tb);
  Value next = arith::AddIOp::create(tb, tile, indexConst(tb, 1));
  buildIfThen(tb, cmp(tb, arith::CmpIPredicate::ult, next, endTile),
              [&](ImplicitLocOpBuilder &nb) {
                copyOperands(nb, loadTileSpan(nb, e, p, batch, kv, next),
                             span.leaf);
              });
  buildWarpgroupEpilogue(tb, e, p, acc, tid, batch, kv, span);
}

Kernel WgmmaScoreKernelBuilder::build(PatternRewriter &rewriter,
                                      Operation *anchor) {
  e = createKernel(rewriter, anchor, "select_stage2_score_tiles_wgmma",
                   scoreKernelParams(p),
                   {workgroupType(ctx, {l.bytes}, rewriter.getI8Type())});
  gpu::GPUFuncOp kernel = e.func();
  kernel.setWorkgroupAttributionAttr(0, LLVM::LLVMDialect::getAlignAttrName(),
                                     rewriter.getI64IntegerAttr(1024));
  applyOccupancyHint(kernel, p.config);
  ImplicitLocOpBuilder b(anchor->getLoc(), rewriter);
  carveTiles(b);
  BlockTiles owned = loadBlockTiles(b, e, p, *p.config.getTilesPerBlock());
  batch = owned.batch;
  kv = owned.kv;
  tid = threadIdX(b);
  g = indexConst(b, G);
  // The first tile's operands; each tile then copies the next one's as soon
  // as its product is done, so that the copy runs under its epilogue (the
  // exps) rather than before the next product.
  buildIfThen(b, cmp(b, arith::CmpIPredicate::ult, owned.first, owned.end),
              [&](ImplicitLocOpBuilder &pb) {
                copyOperands(pb, loadTileSpan(pb, e, p, batch, kv, owned.first),
                             indexConst(pb, -1));
              });
  buildLoop(b, owned.first, owned.end, ValueRange{},
            [&](ImplicitLocOpBuilder &tb, Value tile,
                ValueRange) -> SmallVector<Value> {
              buildTile(tb, tile, owned.end);
              return {};
            });
  gpu::ReturnOp::create(b);
  return e;
}

Kernel mlir::pisa::detail::buildWgmmaScoreKernel(PatternRewriter &rewriter,
                                                 Operation *anchor,
                                                 const TileProblem &p) {
  OpBuilder::InsertionGuard guard(rewriter);
  return WgmmaScoreKernelBuilder(rewriter, p).build(rewriter, anchor);
}
