//===- TileScoring.h - Stage 2 of the two-stage schedule --------*- C++ -*-===//
//
// Groups the (query, contender leaf) pairs that need scoring by leaf with a
// counting sort, cuts each leaf's group into tiles of at most Q_tile
// queries, and scores every tile against its leaf's key tile held in shared
// memory.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_SELECTION_TILESCORING_H
#define PISA_LIB_CONVERSION_PISATOGPU_SELECTION_TILESCORING_H

#include "Kernels/KernelBuilder.h"

#include "pisa/IR/PisaAttrs.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>
#include <string>

namespace mlir::pisa::detail {

/// Device buffers of the counting sort (all i32, per batch x KV head).
struct SortBuffers {
  MemRefType leafCount, leafStart, cursor; ///< [B, Hkv, M1]
  MemRefType tileLeaf, tileFirst;          ///< [B, Hkv, maxTiles]
  MemRefType numTiles;                     ///< [B, Hkv]
  MemRefType sortedPairs;                  ///< [B, Hkv, Nq * g*K]
  MemRefType tileBase; ///< [B, Hkv, M1]: a leaf's first tile
  SmallVector<MemRefType> all() const {
    return {leafCount, leafStart, cursor,      tileLeaf,
            tileFirst, numTiles,  sortedPairs, tileBase};
  }
};

/// What the stage-2 kernels are built for. B, N, Nq and M_1 may be dynamic:
/// kernels read them from their buffers' sizes (Nq from scores, N from keys,
/// M_1 from the leaf arrays).
struct TileProblem {
  int64_t kvHeads, groupSize, headDim, topK;
  int64_t candidates, qTile, blockSize;
  float scale;
  MemRefType queries, keys, contenders, counts, scores;
  SortBuffers sort;
  /// A packed varlen batch seen as B = 1 (docs/gpu.md, "Varlen"): the
  /// kernels take both cu_seqlens, each query row finds its sequence and
  /// the leaf arrays number leaves over the batch (PackedSequences.h).
  MemRefType cuSeqlensQ, cuSeqlensK;
  /// The score_tiles op's kernel_config (null for the bucket kernels).
  KernelConfigAttr config;
  bool packed() const { return bool(cuSeqlensQ); }
};

/// The cu_seqlens kernel parameters of a packed problem (none for a batch).
SmallVector<KernelParam> cuSeqlensParams(const TileProblem &problem);

/// Threads of the counting sort's histogram and scatter blocks (a pair
/// each).
constexpr int64_t kBucketThreads = 256;

/// The counting sort's kernels (histogram, scan, scatter).
struct BucketKernels {
  Kernel histogram, scan, scatter;
};

/// Upper bound on the tiles of one (batch, KV head): every pair can open a
/// tile of its own leaf's group, ceil(Nq * g*K / Q_tile) + M_1 (host side).
Value maxTiles(ImplicitLocOpBuilder &b, Value numQueries, Value numLeaves,
               int64_t candidates, int64_t qTile);

/// The parameters of both scoring kernels (SIMT and tensor-core): queries,
/// keys, offset, leafCount, leafStart, tileLeaf, tileFirst, numTiles,
/// sortedPairs, scores.
SmallVector<KernelParam> scoreKernelParams(const TileProblem &problem);

/// The tile a scoring block owns: its leaf, the position of its first pair
/// in the leaf's group, and how many queries it scores (<= Q_tile); and
/// where its sequence is: the position of the leaf's first key, the
/// storage row of key position 0 (keyShift), N, and queryShift, which
/// takes a query row to its position. Reads the scoring kernel's
/// leafCount, leafStart, tileLeaf, tileFirst and offset (or cu_seqlens).
struct TileSpan {
  Value leaf, first, size;
  Value firstKey, keyShift, numKeys, queryShift;
};
TileSpan loadTileSpan(ImplicitLocOpBuilder &b, const Kernel &score,
                      const TileProblem &p, Value batch, Value kv, Value tile);

/// The tiles a block of a scoring kernel owns: grid y is batch x KV head,
/// block x takes tiles [x T, x T + T) of its (batch, KV head) that exist,
/// T = tilesPerBlock. Reads the kernel's numTiles.
struct BlockTiles {
  Value batch, kv, first, end;
};
BlockTiles loadBlockTiles(ImplicitLocOpBuilder &b, const Kernel &score,
                          const TileProblem &p, int64_t tilesPerBlock);

/// What member `member` (< Q_tile) of a tile scores: its query, the
/// contender slot of the pair, and `limit`, the first key position it may
/// not see (min(N, t + 1)). Loads are clamped so that idle members stay in
/// bounds. Reads the scoring kernel's sortedPairs.
struct TileMember {
  Value query, slot, limit;
};
TileMember loadTileMember(ImplicitLocOpBuilder &b, const Kernel &score,
                          const TileProblem &p, Value batch, Value kv,
                          const TileSpan &span, Value member);

/// The mma.sync scorer's layout choices (kernel_config rows_per_warp and
/// epilogue): a warp's rows (16 or 32 of the tile's Q_tile x G), and
/// whether the row LSEs and head sums run on the accumulators in registers
/// (each warp's rows whole queries of G a multiple of 16) or through a
/// score tile in shared memory.
struct MmaScoreShape {
  int64_t rowsPerWarp;
  bool registerEpilogue;
};
/// 32 rows per warp where Q_tile x G allows (each key tile read half as
/// often), the register epilogue where it applies.
MmaScoreShape defaultMmaScoreShape(const TileProblem &problem);
/// Why the mma.sync scorer of `shape` cannot score `problem`, or nullopt:
/// it takes f16 and bf16 with Q_tile * G a multiple of the rows per warp
/// (at most 32 warps), C a multiple of 8, d of 16, and the staged tiles
/// within the 48 KiB of static shared memory.
std::optional<std::string> mmaScoreUnsupported(const TileProblem &problem,
                                               const MmaScoreShape &shape);
int64_t mmaScoreThreads(const TileProblem &problem, const MmaScoreShape &shape);
/// Blocks per SM as shared memory allows (at most 8): the occupancy ptxas
/// keeps registers for.
int64_t mmaScoreBlocksPerSM(const TileProblem &problem,
                            const MmaScoreShape &shape);
/// Consecutive tiles one block scores: they mostly share a leaf (the
/// scatter groups them by leaf), so each leaf's keys are staged once.
constexpr int64_t kScoreTilesPerBlock = 8;
/// The mma.sync scorer for p.config (variant mma_sync).
Kernel buildMmaScoreKernel(PatternRewriter &rewriter, Operation *anchor,
                           const TileProblem &problem);

/// Why warpgroup scoring (sm_90a, TileScoringWgmma.cpp) cannot score
/// `problem`, or nullopt: it takes f16 and bf16 with Q_tile * G = 64
/// (wgmma's M) and G = 8 or 16, C a multiple of 8 up to 256, d of 64, and
/// two query tiles and the key tile within 48 KiB.
std::optional<std::string> wgmmaScoreUnsupported(const TileProblem &problem);
int64_t wgmmaScoreThreads();
/// Blocks per SM as shared memory and the accumulators' registers allow.
int64_t wgmmaScoreBlocksPerSM(const TileProblem &problem);
/// The wgmma scorer for p.config (variant wgmma).
Kernel buildWgmmaScoreKernel(PatternRewriter &rewriter, Operation *anchor,
                             const TileProblem &problem);

/// The SIMT scorer's threads: a thread per row of the tile.
int64_t simtScoreThreads(const TileProblem &problem);

/// Kernels of pisa.kernel.bucket; reads only the sizes, contenders, counts
/// and sort buffers of `problem`.
BucketKernels buildBucketKernels(PatternRewriter &rewriter, Operation *anchor,
                                 const TileProblem &problem);
/// The kernel of pisa.kernel.score_tiles, as its p.config says.
Kernel buildScoreKernel(PatternRewriter &rewriter, Operation *anchor,
                        const TileProblem &problem);

/// Zeroes the histogram and launches the three sort kernels over `groups`
/// (B * Hkv) x the pairs; `sort` holds the buffers in SortBuffers::all()
/// order.
void launchBucketKernels(ImplicitLocOpBuilder &b, const BucketKernels &kernels,
                         const TileProblem &problem, Value groups,
                         Value numQueries, Value offset, Value contenders,
                         Value counts, ArrayRef<Value> sort,
                         ArrayRef<KernelOperand> cuSeqlens);
/// Launches the scoring kernel over `groups` x the tiles (at most
/// `tileBound`, maxTiles), `config`'s threads a block and tiles_per_block
/// tiles each.
void launchScoreKernel(ImplicitLocOpBuilder &b, const Kernel &kernel,
                       KernelConfigAttr config, Value groups, Value tileBound,
                       ArrayRef<KernelOperand> operands);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_SELECTION_TILESCORING_H
