//===- TileScoringMMA.cpp - Stage-2 tile scoring on tensor cores ----------===//
//
// For f16 and bf16 inputs a tile's queries (Q_tile * G rows of d) and its
// leaf's keys (C rows of d) are staged in shared memory, and each warp
// states its R rows' scores (R = 32 where Q_tile * G allows, else 16) as
// one structured tile product:
//
//   vector.contract (R x d) x (C x d)^T -> R x C, f32 accumulation
//
// between vector.transfer_reads of the shared tiles, written back to shared
// memory with vector.transfer_write. --pisa-vector-to-mma-sync turns that
// into ldmatrix + mma.sync m16n8k16 (nothing is rounded that the inputs did
// not already round). The per-row LSE over the visible keys and the sum over
// the G heads are vector ops (masked loads, vector.reduction) on the score
// tile. f32 inputs keep the SIMT scorer: tf32 tensor cores would round them.
//
// Shared memory is one byte buffer: query and key tiles with rows padded by
// 8 elements (ldmatrix reads 8 rows at once; a 16-byte pad puts them in
// different banks), then the score tile over the same bytes once every warp
// has read its operands.
//
//===----------------------------------------------------------------------===//

#include "Kernels/KernelBuilder.h"
#include "Kernels/RowSoftmax.h"
#include "Kernels/TileCopy.h"
#include "Selection/TileScoring.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>
#include <limits>
#include <tuple>

using namespace mlir;
using namespace mlir::pisa::detail;

namespace {
/// Shared-memory layout of the scoring block.
struct MmaTileLayout {
  int64_t rows, rowsPerWarp, tileStride, scoreStride, keyOffset, bytes;
  int64_t rowLseBytes; ///< the row LSEs' buffer (shared-memory epilogue)
  /// Each warp's rows are whole queries (G a multiple of 16 dividing the
  /// warp's rows): the LSEs and head sums run on the mma accumulators in
  /// registers (AccumulatorEpilogue.cpp) and no score tile is needed.
  bool registerEpilogue;

  MmaTileLayout(const TileProblem &p, const MmaScoreShape &shape) {
    const int64_t c = p.blockSize;
    rows = p.qTile * p.groupSize;
    rowsPerWarp = shape.rowsPerWarp;
    tileStride = p.headDim + 8;
    // Score rows: with 16 rows per warp the LSE's eight lanes per access
    // read eight rows, conflict-free at a stride of 4 mod 32 words. With 32
    // rows a stride of 8 mod 32 makes the fragment stores conflict-free
    // (a half-warp writes four rows of 8 words) and the LSE rotates its
    // reads to stay so (see rotatedRowLoad).
    scoreStride = rowsPerWarp == 32 ? c + (40 - c % 32) % 32 : c + 4;
    registerEpilogue = shape.registerEpilogue;
    // The score tile overlays the query tile only, so the key tile survives
    // for the block's next tile of the same leaf.
    keyOffset = registerEpilogue
                    ? rows * tileStride * 2
                    : std::max(rows * tileStride * 2, rows * scoreStride * 4);
    bytes = keyOffset + c * tileStride * 2;
    rowLseBytes = registerEpilogue ? 0 : rows * 4;
  }
};

/// The shape of p.config (variant mma_sync).
MmaScoreShape configuredShape(const TileProblem &p) {
  return {*p.config.getRowsPerWarp(),
          p.config.getEpilogue() == pisa::KernelEpilogue::Registers};
}
} // namespace

MmaScoreShape mlir::pisa::detail::defaultMmaScoreShape(const TileProblem &p) {
  const int64_t rows = p.qTile * p.groupSize;
  // Every warp reads the whole key tile for its rows, so a warp with 32
  // rows halves those shared-memory reads per query.
  const int64_t rowsPerWarp = rows % 32 == 0 ? 32 : 16;
  return {rowsPerWarp, p.groupSize % 16 == 0 && rowsPerWarp % p.groupSize == 0};
}

std::optional<std::string>
mlir::pisa::detail::mmaScoreUnsupported(const TileProblem &p,
                                        const MmaScoreShape &shape) {
  const MmaTileLayout l(p, shape);
  Type elem = p.keys.getElementType();
  auto why = [](const Twine &t) { return std::optional(t.str()); };
  if (!elem.isBF16() && !elem.isF16())
    return why("mma_sync scores f16 or bf16 keys");
  if (l.rows % l.rowsPerWarp)
    return why("Q_tile x G (" + Twine(l.rows) + ") is not a multiple of " +
               Twine(l.rowsPerWarp) + " rows per warp");
  if (l.rows / l.rowsPerWarp > 32)
    return why("Q_tile x G (" + Twine(l.rows) + ") needs more than 32 warps");
  if (p.blockSize % 8 || p.headDim % 16)
    return why("mma_sync needs C a multiple of 8 and d of 16");
  if (shape.registerEpilogue &&
      (p.groupSize % 16 || l.rowsPerWarp % p.groupSize))
    return why("the register epilogue needs G (" + Twine(p.groupSize) +
               ") a multiple of 16 dividing the rows per warp");
  if (l.bytes + l.rowLseBytes > kStaticSharedBytes)
    return why("the staged tiles take " + Twine(l.bytes + l.rowLseBytes) +
               " bytes, over the 48 KiB of static shared memory");
  return std::nullopt;
}

int64_t mlir::pisa::detail::mmaScoreThreads(const TileProblem &p,
                                            const MmaScoreShape &shape) {
  const MmaTileLayout l(p, shape);
  return l.rows / l.rowsPerWarp * 32;
}

int64_t mlir::pisa::detail::mmaScoreBlocksPerSM(const TileProblem &p,
                                                const MmaScoreShape &shape) {
  const MmaTileLayout l(p, shape);
  // As many blocks per SM as shared memory allows (ptxas would otherwise
  // keep every hoisted address in registers and fit fewer).
  return std::clamp<int64_t>(blocksBySharedMemory(l.bytes + l.rowLseBytes), 1,
                             8);
}

/// Loads `width` scores of row `r` from column `start` as 4-wide chunks,
/// lanes whose bit 2 is set starting one chunk later (wrapping): with a row
/// stride of 8 mod 32 words, the eight lanes of a 16-byte access then cover
/// all 32 banks. Returns the scores and the column offset (from `start`) of
/// each element.
static std::pair<Value, Value> rotatedRowLoad(ImplicitLocOpBuilder &b,
                                              Value tile, Value r, Value start,
                                              Value lane, int64_t width) {
  const int64_t chunks = width / 4;
  Value shift = arith::RemUIOp::create(
      b, arith::DivUIOp::create(b, lane, indexConst(b, 4)), indexConst(b, 2));
  SmallVector<Value> parts;
  for (int64_t j = 0; j < chunks; ++j) {
    Value chunk = arith::RemUIOp::create(
        b, arith::AddIOp::create(b, shift, indexConst(b, j)),
        indexConst(b, chunks));
    Value col = arith::AddIOp::create(
        b, start, arith::MulIOp::create(b, chunk, indexConst(b, 4)));
    parts.push_back(vector::LoadOp::create(
        b, VectorType::get({4}, b.getF32Type()), tile, ValueRange{r, col},
        false, llvm::MaybeAlign(16)));
  }
  // Concatenate pairwise, an odd one out carried to the next round (C / 4
  // chunks need not be a power of two).
  while (parts.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < parts.size(); i += 2)
      next.push_back(concatVectors(b, parts[i], parts[i + 1]));
    if (parts.size() % 2)
      next.push_back(parts.back());
    parts = std::move(next);
  }
  // Element k holds column (k + 4 * shift) mod width.
  auto i32s = VectorType::get({width}, b.getI32Type());
  Value columns = arith::RemUIOp::create(
      b,
      arith::AddIOp::create(
          b, iotaI32(b, width),
          vector::BroadcastOp::create(
              b, i32s,
              toI32(b, arith::MulIOp::create(b, shift, indexConst(b, 4))))),
      arith::ConstantOp::create(
          b, i32s, DenseElementsAttr::get(i32s, b.getI32IntegerAttr(width))));
  return {parts.front(), columns};
}

/// The score of each query of the warp's rows against the tile's leaf, from
/// the warp's R x C product where mma.sync leaves it: per row the LSE (base
/// 2, scale folded in), per query the sum over its G rows, written by lane
/// 0 for the members that exist. No key mask: stage 2 scores contenders
/// only, leaves at most b_t - 2 (the forced set holds b_t - 1 and b_t), so
/// every key of the leaf is visible to every query of the tile and exists.
static void buildRegisterEpilogue(ImplicitLocOpBuilder &b, const Kernel &e,
                                  const TileProblem &p, Value product,
                                  Value warp, Value lane, Value batch, Value kv,
                                  const TileSpan &span, Value n,
                                  int64_t warpRows) {
  Type f32 = b.getF32Type();
  auto tileType = cast<VectorType>(product.getType());
  const int64_t G = p.groupSize;
  auto rowType = VectorType::get({warpRows}, f32);
  auto splat = [&](VectorType type, float v) { return f32Splat(b, type, v); };
  Value logits =
      arith::MulFOp::create(b, product, splat(tileType, p.scale * kLog2E));
  Value rowMax = vector::MultiDimReductionOp::create(
      b, logits, splat(rowType, -std::numeric_limits<float>::infinity()),
      ArrayRef<bool>{false, true}, vector::CombiningKind::MAXIMUMF);
  Value shift = vector::BroadcastOp::create(
      b, tileType,
      vector::ShapeCastOp::create(b, VectorType::get({warpRows, 1}, f32),
                                  rowMax));
  Value exps = shiftedExp2(b, logits, shift);
  Value sums = vector::MultiDimReductionOp::create(
      b, exps, splat(rowType, 0.0f), ArrayRef<bool>{false, true},
      vector::CombiningKind::ADD);
  Value lse2 = lse2FromSum(b, rowMax, sums);
  const int64_t members = warpRows / G;
  for (int64_t i = 0; i < members; ++i) {
    Value heads = vector::ExtractStridedSliceOp::create(
        b, lse2, ArrayRef<int64_t>{i * G}, ArrayRef<int64_t>{G},
        ArrayRef<int64_t>{1});
    Value total = toBaseE(
        b, vector::ReductionOp::create(b, vector::CombiningKind::ADD, heads));
    Value member = arith::AddIOp::create(
        b, arith::MulIOp::create(b, warp, indexConst(b, members)),
        indexConst(b, i));
    Value writes = arith::AndIOp::create(
        b, cmp(b, arith::CmpIPredicate::eq, lane, indexConst(b, 0)),
        cmp(b, arith::CmpIPredicate::ult, member, n));
    buildIfThen(b, writes, [&](ImplicitLocOpBuilder &wb) {
      TileMember scored = loadTileMember(wb, e, p, batch, kv, span, member);
      memref::StoreOp::create(wb, total, e.arg("scores"),
                              ValueRange{batch, kv, scored.query, scored.slot});
    });
  }
}

/// The lane 16 away holds the other half of a row of 32 scores.
constexpr int64_t kRowHalves[] = {16};

namespace {
/// The mma.sync scorer's kernel (p.config: rows per warp, epilogue, tiles
/// per block, occupancy), each phase of a tile built by its own method in
/// the order the body runs: stage the queries and, for a new leaf, the
/// keys; the warps' tile products; the epilogue (in registers, or through
/// the score tile: the row LSEs, then each member's head sum).
class MmaScoreKernelBuilder {
public:
  MmaScoreKernelBuilder(PatternRewriter &rewriter, const TileProblem &p)
      : p(p), l(p, configuredShape(p)), ctx(rewriter.getContext()),
        f32(rewriter.getF32Type()), elem(p.keys.getElementType()), d(p.headDim),
        c(p.blockSize), threads(p.config.getThreads()), G(p.groupSize),
        warpRows(l.rowsPerWarp), lanesPerRow(32 / warpRows),
        keysPerLane(c / lanesPerRow) {}

  Kernel build(PatternRewriter &rewriter, Operation *anchor);

private:
  /// The block's shared memory carved into the query, key and score tiles.
  void carveTiles(ImplicitLocOpBuilder &b);
  /// One tile of the block; returns the leaf whose keys are staged after
  /// it.
  Value buildTile(ImplicitLocOpBuilder &tb, Value tile, Value stagedLeaf);
  /// The tile's query rows (row = member * G + head); idle members load a
  /// clamped row that no result reads.
  void stageQueries(ImplicitLocOpBuilder &tb, const TileSpan &span, Value g);
  /// The leaf's keys (zeros past N) when the leaf is not the staged one.
  void stageKeys(ImplicitLocOpBuilder &tb, const TileSpan &span,
                 Value stagedLeaf);
  /// The row LSEs over the visible keys from the score tile, into rowLse.
  void sharedRowLse(ImplicitLocOpBuilder &tb, const TileSpan &span, Value g,
                    Value lane, Value r0);
  /// Thread t < n sums the G head LSEs of member t and writes its score.
  void sharedHeadSums(ImplicitLocOpBuilder &tb, const TileSpan &span, Value g);

  const TileProblem &p;
  const MmaTileLayout l;
  MLIRContext *ctx;
  Type f32, elem;
  const int64_t d, c, threads, G, warpRows, lanesPerRow;
  const int64_t keysPerLane; // in the row LSE
  Kernel e;
  Value queryTile, keyTile, scoreTile, rowLse;
  Value batch, kv, tid, zero;
};
} // namespace

void MmaScoreKernelBuilder::carveTiles(ImplicitLocOpBuilder &b) {
  gpu::GPUFuncOp kernel = e.func();
  Value bytes = kernel.getWorkgroupAttributions()[0];
  if (!l.registerEpilogue)
    rowLse = kernel.getWorkgroupAttributions()[1];
  auto view = [&](int64_t offset, ArrayRef<int64_t> shape, Type type) {
    return memref::ViewOp::create(b, workgroupType(ctx, shape, type), bytes,
                                  indexConst(b, offset), ValueRange{})
        .getResult();
  };
  queryTile = view(0, {l.rows, l.tileStride}, elem);
  keyTile = view(l.keyOffset, {c, l.tileStride}, elem);
  if (!l.registerEpilogue)
    scoreTile = view(0, {l.rows, l.scoreStride}, f32);
}

void MmaScoreKernelBuilder::stageQueries(ImplicitLocOpBuilder &tb,
                                         const TileSpan &span, Value g) {
  auto chunk = VectorType::get({kChunkElems}, elem);
  ChunkedTile tile{l.rows, d, threads};
  copyChunks(
      tb, tile, tid,
      [&](ImplicitLocOpBuilder &lb, Value i) -> Value {
        Value r = tile.row(lb, i), col = tile.column(lb, i);
        Value head = arith::AddIOp::create(lb, arith::MulIOp::create(lb, kv, g),
                                           arith::RemUIOp::create(lb, r, g));
        TileMember m = loadTileMember(lb, e, p, batch, kv, span,
                                      arith::DivUIOp::create(lb, r, g));
        return vector::LoadOp::create(lb, chunk, e.arg("queries"),
                                      ValueRange{batch, head, m.query, col},
                                      false, llvm::MaybeAlign(16));
      },
      [&](ImplicitLocOpBuilder &lb, Value i, Value v) {
        vector::StoreOp::create(lb, v, queryTile,
                                ValueRange{tile.row(lb, i), tile.column(lb, i)},
                                false, llvm::MaybeAlign(16));
      });
}

void MmaScoreKernelBuilder::stageKeys(ImplicitLocOpBuilder &tb,
                                      const TileSpan &span, Value stagedLeaf) {
  auto chunk = VectorType::get({kChunkElems}, elem);
  ChunkedTile tile{c, d, threads};
  // Key positions (of the leaf's sequence); rows add span.keyShift.
  Value keyBase = span.firstKey;
  Value lastKey = arith::SubIOp::create(tb, span.numKeys, indexConst(tb, 1));
  Value zeroChunk = arith::ConstantOp::create(
      tb, chunk, DenseElementsAttr::get(chunk, tb.getZeroAttr(elem)));
  Value newLeaf = cmp(tb, arith::CmpIPredicate::ne, span.leaf, stagedLeaf);
  buildIfThen(tb, newLeaf, [&](ImplicitLocOpBuilder &kb) {
    copyChunks(
        kb, tile, tid,
        [&](ImplicitLocOpBuilder &lb, Value i) -> Value {
          Value r = tile.row(lb, i), col = tile.column(lb, i);
          Value key = arith::AddIOp::create(lb, keyBase, r);
          Value row = arith::AddIOp::create(
              lb, span.keyShift, arith::MinUIOp::create(lb, key, lastKey));
          Value v = vector::LoadOp::create(lb, chunk, e.arg("keys"),
                                           ValueRange{batch, kv, row, col},
                                           false, llvm::MaybeAlign(16));
          return arith::SelectOp::create(
              lb, cmp(lb, arith::CmpIPredicate::ule, key, lastKey), v,
              zeroChunk);
        },
        [&](ImplicitLocOpBuilder &lb, Value i, Value v) {
          vector::StoreOp::create(
              lb, v, keyTile, ValueRange{tile.row(lb, i), tile.column(lb, i)},
              false, llvm::MaybeAlign(16));
        });
  });
}

void MmaScoreKernelBuilder::sharedRowLse(ImplicitLocOpBuilder &tb,
                                         const TileSpan &span, Value g,
                                         Value lane, Value r0) {
  // Lane l takes row r0 + l % R and the keys [h * S, (h + 1) * S) of the
  // leaf, h = l / R, S = C * R / 32.
  Value r = arith::AddIOp::create(
      tb, r0, arith::RemUIOp::create(tb, lane, indexConst(tb, warpRows)));
  Value part = arith::DivUIOp::create(tb, lane, indexConst(tb, warpRows));
  Value partStart =
      arith::MulIOp::create(tb, part, indexConst(tb, keysPerLane));
  Value member = arith::DivUIOp::create(tb, r, g);
  TileMember row = loadTileMember(tb, e, p, batch, kv, span, member);
  // Idle rows see no key: their LSE is -inf and never read.
  Value limit = arith::SelectOp::create(
      tb, cmp(tb, arith::CmpIPredicate::ult, member, span.size), row.limit,
      zero);
  Value visible = arith::SubIOp::create(
      tb, limit, arith::AddIOp::create(tb, span.firstKey, partStart));
  visible =
      arith::MinSIOp::create(tb, arith::MaxSIOp::create(tb, visible, zero),
                             indexConst(tb, keysPerLane));
  auto rowType = VectorType::get({keysPerLane}, f32);
  Value raw, columns;
  if (warpRows == 32) {
    std::tie(raw, columns) =
        rotatedRowLoad(tb, scoreTile, r, partStart, lane, keysPerLane);
  } else {
    columns = iotaI32(tb, keysPerLane);
    raw =
        vector::LoadOp::create(tb, rowType, scoreTile, ValueRange{r, partStart},
                               false, llvm::MaybeAlign(16));
  }
  // In base 2 with the scale folded in: exp2 is one instruction where exp
  // is a range reduction around it. LSE = ln 2 * (max2 + log2(sum)).
  Value logits = maskedRowLogits(tb, raw, columns, visible, p.scale);
  // Reassociation lets the 32 or 64 terms reduce as a tree.
  auto reassoc = arith::FastMathFlags::reassoc;
  Value rowMax = vector::ReductionOp::create(
      tb, vector::CombiningKind::MAXIMUMF, logits, reassoc);
  if (lanesPerRow == 2)
    rowMax = laneAllReduce(tb, rowMax, kRowHalves, /*isMax=*/true);
  Value shift = emptyRowShift(tb, rowMax);
  Value exps =
      shiftedExp2(tb, logits, vector::BroadcastOp::create(tb, rowType, shift));
  Value sum = vector::ReductionOp::create(tb, vector::CombiningKind::ADD, exps,
                                          reassoc);
  if (lanesPerRow == 2)
    sum = laneAllReduce(tb, sum, kRowHalves, /*isMax=*/false);
  Value lse = toBaseE(tb, lse2FromSum(tb, rowMax, sum));
  buildIfThen(tb, cmp(tb, arith::CmpIPredicate::eq, part, zero),
              [&](ImplicitLocOpBuilder &wb) {
                memref::StoreOp::create(wb, lse, rowLse, ValueRange{r});
              });
}

void MmaScoreKernelBuilder::sharedHeadSums(ImplicitLocOpBuilder &tb,
                                           const TileSpan &span, Value g) {
  buildIfThen(tb, cmp(tb, arith::CmpIPredicate::ult, tid, span.size),
              [&](ImplicitLocOpBuilder &wb) {
                TileMember scored =
                    loadTileMember(wb, e, p, batch, kv, span, tid);
                Value total = headSumInShared(
                    wb, rowLse, arith::MulIOp::create(wb, tid, g), G);
                memref::StoreOp::create(
                    wb, total, e.arg("scores"),
                    ValueRange{batch, kv, scored.query, scored.slot});
              });
}

Value MmaScoreKernelBuilder::buildTile(ImplicitLocOpBuilder &tb, Value tile,
                                       Value stagedLeaf) {
  // The previous tile's reads of the query tile (ldmatrix, and the score
  // tile and row LSEs overlaying it) are done before it is restaged.
  gpu::BarrierOp::create(tb);
  TileSpan span = loadTileSpan(tb, e, p, batch, kv, tile);
  Value g = indexConst(tb, G);
  stageQueries(tb, span, g);
  stageKeys(tb, span, stagedLeaf);
  gpu::BarrierOp::create(tb);

  // The tile product: warp w owns rows R*w .. R*w + R - 1.
  Value lane = arith::RemUIOp::create(tb, tid, indexConst(tb, 32));
  Value warp = arith::DivUIOp::create(tb, tid, indexConst(tb, 32));
  Value r0 = arith::MulIOp::create(tb, warp, indexConst(tb, warpRows));
  Value pad = arith::ConstantOp::create(tb, tb.getZeroAttr(elem));
  SmallVector<bool> inBounds(2, true);
  Value lhs = vector::TransferReadOp::create(
      tb, VectorType::get({warpRows, d}, elem), queryTile, ValueRange{r0, zero},
      pad, inBounds);
  Value rhs =
      vector::TransferReadOp::create(tb, VectorType::get({c, d}, elem), keyTile,
                                     ValueRange{zero, zero}, pad, inBounds);
  Value product = tileProduct(
      tb, lhs, rhs, f32Splat(tb, VectorType::get({warpRows, c}, f32), 0.0f),
      /*rhsIsKN=*/false);
  if (l.registerEpilogue) {
    buildRegisterEpilogue(tb, e, p, product, warp, lane, batch, kv, span,
                          span.size, warpRows);
    return span.leaf;
  }
  gpu::BarrierOp::create(tb); // queries read before scores overwrite them
  vector::TransferWriteOp::create(tb, product, scoreTile, ValueRange{r0, zero},
                                  inBounds);
  gpu::BarrierOp::create(tb);
  sharedRowLse(tb, span, g, lane, r0);
  gpu::BarrierOp::create(tb);
  sharedHeadSums(tb, span, g);
  return span.leaf;
}

Kernel MmaScoreKernelBuilder::build(PatternRewriter &rewriter,
                                    Operation *anchor) {
  e = createKernel(rewriter, anchor, "select_stage2_score_tiles_mma",
                   scoreKernelParams(p),
                   l.registerEpilogue
                       ? SmallVector<Type>{workgroupType(ctx, {l.bytes},
                                                         rewriter.getI8Type())}
                       : SmallVector<Type>{workgroupType(ctx, {l.bytes},
                                                         rewriter.getI8Type()),
                                           workgroupType(ctx, {l.rows}, f32)});
  gpu::GPUFuncOp kernel = e.func();
  kernel.setWorkgroupAttributionAttr(0, LLVM::LLVMDialect::getAlignAttrName(),
                                     rewriter.getI64IntegerAttr(16));
  applyOccupancyHint(kernel, p.config);
  ImplicitLocOpBuilder b(anchor->getLoc(), rewriter);
  carveTiles(b);
  // Block x scores tiles [T x, T x + T) that exist, in order.
  BlockTiles owned = loadBlockTiles(b, e, p, *p.config.getTilesPerBlock());
  batch = owned.batch;
  kv = owned.kv;
  tid = threadIdX(b);
  zero = indexConst(b, 0);
  Value noLeaf = indexConst(b, -1);
  buildLoop(b, owned.first, owned.end, ValueRange{noLeaf},
            [&](ImplicitLocOpBuilder &tb, Value tile,
                ValueRange stagedLeaf) -> SmallVector<Value> {
              return {buildTile(tb, tile, stagedLeaf.front())};
            });
  gpu::ReturnOp::create(b);
  return e;
}

Kernel mlir::pisa::detail::buildMmaScoreKernel(PatternRewriter &rewriter,
                                               Operation *anchor,
                                               const TileProblem &p) {
  OpBuilder::InsertionGuard guard(rewriter);
  return MmaScoreKernelBuilder(rewriter, p).build(rewriter, anchor);
}
