//===- AttentionGrad.h - The backward kernels' plans and limits -*- C++ -*-===//
//
// What --pisa-decompose-to-kernels checks (the limits) and what the
// backward's two block kernels are built from (their shared-memory tiles)
// have one definition here.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_ATTENTIONGRAD_H
#define PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_ATTENTIONGRAD_H

#include "Attention/QueryTiles.h"
#include "Kernels/KernelBuilder.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <utility>

namespace mlir::pisa::detail {

/// Four warps per block, as the forward's staged kernel.
constexpr int64_t kGradWarps = 4;
constexpr int64_t kGradThreads = 32 * kGradWarps;
/// The dq pass's query tile by default: three queries a block and the
/// warp that copies their union's blocks, two blocks an SM (eight warps
/// keep up to 255 registers a lane).
constexpr int64_t kGradTileQueries = 3;
/// Threads per block of the query lists' zero and count kernels (a word or
/// a query each).
constexpr int64_t kListThreads = 128;

/// Where head rows sit in a tile: `rows` rows, token s's heads at rows
/// [s R, (s + 1) R) (R = rowsPerToken, G rounded up), `tokens` = rows / R
/// tokens at a time; threadsPerRow consecutive lanes split a row.
struct GradRows {
  int64_t rows, rowsPerToken, tokens, threadsPerRow;
  GradRows(int64_t rows, int64_t rowsPerToken);
  /// A row's columns each thread takes out of `width`.
  int64_t columns(int64_t width) const { return width / threadsPerRow; }
};

/// The query kernel's tiles (byte offsets into dynamic shared memory): Q
/// [R x d], dO [R x dv], K [C x d], V [C x dv] (16-bit, rows padded by 8
/// elements), S and dP [R x C] (f32), dS [R x C] (16-bit), dq [R x d]
/// (f32) and the list of attended blocks [K] (i32). R: G rounded up to 16,
/// 32 or 64 (one query).
struct QueryGradPlan {
  GradRows rows;
  int64_t headDim, valueDim, blockSize, topK;
  int64_t query, gradOut, key, value, score, gradProb, gradScore, gradQuery,
      list, bytes;
  QueryGradPlan(int64_t groupSize, int64_t headDim, int64_t valueDim,
                int64_t blockSize, int64_t topK);
};

/// Whether the query kernel runs on query tiles (QueryGradTiles.cpp): W
/// consecutive queries a block (kGradTileQueries by default), a warp each,
/// over the union of their blocks; G <= 16 (one m16 tile of head rows), d a
/// multiple of 16 up to 128 (dQ in a lane's registers: d / 2 f32), dv a
/// multiple of 16, C of 16, 32 or 64, 16-bit inputs. Else the staged query
/// kernel.
bool queryTileGradFits(Type elem, int64_t groupSize, int64_t headDim,
                       int64_t valueDim, int64_t blockSize);
/// What queryTileGradFits asks, as a diagnostic says it.
constexpr llvm::StringLiteral kQueryTileGradNeeds =
    "the query-tile kernel needs G <= 16, d a multiple of 16 up to 128, dv a "
    "multiple of 16, C of 16, 32 or 64 and 16-bit inputs";

/// The query-tile kernel's shared memory: the union's two buffers of an
/// entry's K and V (QueryTiles.h), each warp's Q [16 x d] and dO [16 x dv]
/// head rows (16-bit, rows padded by 8 elements for ldmatrix), the
/// union's lists.
struct QueryTileGradPlan {
  QueryTileUnionPlan unionPlan;
  QueryTileUnionPlan::WarpRows query, gradOut;
  int64_t bytes;
  QueryTileGradPlan(int64_t warps, int64_t headDim, int64_t valueDim,
                    int64_t blockSize, int64_t topK);
};

class Kernel;
/// The query-tile kernel's body (parameters as the staged one's).
void buildQueryTileGrad(ImplicitLocOpBuilder &b, const Kernel &kernel,
                        const QueryTileGradPlan &plan, int64_t groupSize,
                        int64_t kvHeads, float scale);

/// Whether the key kernel keeps dK and dV in registers (the register key
/// kernel, AttentionGradKeys.cpp): 16-bit inputs, C of 32 or 64 (each warp
/// owns 16 keys), d and dv multiples of 16 with d + dv <= 256 (a lane
/// holds (d + dv) / 2 f32 sums). Else the staged key kernel.
bool keyGradientsInRegisters(Type elem, int64_t headDim, int64_t valueDim,
                             int64_t blockSize);
/// Whether the register key kernel can run its products on a warpgroup
/// (wgmma, sm_90a): C = 64 keys are wgmma's M, and its tiles are in the
/// 128-byte swizzle, so d and dv are multiples of 64 (d + dv <= 256 as in
/// registers); 16-bit inputs.
bool keyGradientsOnWarpgroup(Type elem, int64_t headDim, int64_t valueDim,
                             int64_t blockSize);
/// What keyGradientsOnWarpgroup asks, as a diagnostic says it.
constexpr llvm::StringLiteral kKeyGradWarpgroupNeeds =
    "the warpgroup key kernel needs sm_90a, C = 64, d and dv multiples of 64 "
    "with d + dv <= 256 and 16-bit inputs";

/// The key kernel's tiles: K [C x d] and V [C x dv] of the block, Q [64 x
/// d] and dO [64 x dv] of the step's queries (64 / R of them, R = G
/// rounded up to a power of two; 16-bit), the dk [C x d] and dv [C x dv]
/// sums (f32), and the list of the segment's queries not yet stepped
/// through with its length (i32). The staged kernel adds S and dP [64 x C]
/// (f32) and P^T and dS^T [C x 64] (16-bit) and accumulates into the sums;
/// the register kernel stages two steps' rows (Q and dO at query /
/// gradOut and queryNext / gradOutNext, each step row's lse and D (f32)
/// and visible keys (i32) per buffer: the next step's copies fly while
/// this one computes), and writes its register sums into the sums' tiles
/// at the end (over the 16-bit tiles when they fit there). On a warpgroup
/// (`warpgroup`, register kernel only) the 16-bit tiles are in the 128-byte
/// swizzle ([width / 64, rows, 8, 8], WarpgroupMma.h) at 1024-byte
/// boundaries from the allocation's first one (SharedTiles::alignBase,
/// whose slack `bytes` includes).
struct KeyGradPlan {
  GradRows rows;
  int64_t headDim, valueDim, blockSize;
  bool inRegisters, warpgroup;
  int64_t key, value, query, gradOut,
      queryNext = 0, gradOutNext = 0, score = 0, gradProb = 0, probT = 0,
      gradScoreT = 0, rowLse[2] = {0, 0}, rowDelta[2] = {0, 0},
      rowVisible[2] = {0, 0}, gradKey, gradValue, stepsAhead, list,
      listCapacity, listCount, bytes;
  /// With `scores` (the register kernels store each step's dS tiles): per
  /// buffer, each step row's query and its tile row's first column in
  /// `scores` (i32; -1 where the row holds no head), after the rest.
  bool scores = false;
  int64_t rowQuery[2] = {0, 0}, rowColumn[2] = {0, 0};
  /// The register kernel asks the L2 for step s + prefetchSteps's rows when
  /// step s + 1's copies are issued (kernel_config prefetch_ahead; 0:
  /// none).
  int64_t prefetchSteps = 0;
  KeyGradPlan(int64_t groupSize, int64_t headDim, int64_t valueDim,
              int64_t blockSize, bool inRegisters, bool warpgroup = false,
              bool scores = false);
};

/// A key block's list is split into segments, one block each, of at
/// most ceil(Nq / kMinSegmentQueries) (at least one); the segments add
/// their sums in order (docs/gpu.md, "Sparse attention backward"). A key
/// block takes as many as keep the grid at about kKeySegmentBlocks blocks
/// (over every key block and batch x KV head), at most kMaxKeySegments:
/// each waits for the one before it to add its sums, so a large grid
/// takes one. Key block 0 of a batch's rows, which every query of a PISA
/// selection attends, takes up to kMaxFirstBlockSegments.
constexpr int64_t kMaxKeySegments = 16;
constexpr int64_t kKeySegmentBlocks = 2048;
constexpr int64_t kMaxFirstBlockSegments = 64;
constexpr int64_t kMinSegmentQueries = 256;
/// A segment's run of its block's list is at least this many entries
/// (rounded up to whole steps): each segment stages the block's keys and
/// values and adds its sums in the chain.
constexpr int64_t kMinSegmentEntries = 128;

/// The query index's chunks: Q = min(kMaxListChunks, ceil(Nq /
/// kListChunkQueries)), at least 1, each of ceil(Nq / Q) queries; its
/// columns after the chunks' (a row's length, start low and high words,
/// segment counter).
constexpr int64_t kListChunkQueries = 32;
constexpr int64_t kMaxListChunks = 256;
constexpr int64_t kIndexExtraColumns = 4;
/// Q for Nq queries (host or kernel code).
Value queryListChunks(ImplicitLocOpBuilder &b, Value numQueries);
/// The query index's columns in kernel code: Q (its width less
/// kIndexExtraColumns), column Q + `after`, and a row's start in the lists
/// (i64, from its two words at Q + 1 and Q + 2).
struct QueryIndexColumns {
  Value chunks;
  QueryIndexColumns(ImplicitLocOpBuilder &b, Value index);
  Value column(ImplicitLocOpBuilder &b, int64_t after) const;
  Value rowStart(ImplicitLocOpBuilder &b, Value index, ValueRange row) const;
};

/// List entries a key block copies into shared memory at a time (one a
/// thread).
constexpr int64_t kListWindow = kGradThreads;

/// The register key kernel steps once its list holds this many steps'
/// queries (or its run of the list is done), and copies each step's rows while
/// the one before it computes: only a batch's first step waits for its copies.
constexpr int64_t kKeyStepsAhead = 4;

/// prefetch_ahead of the register key kernel where it stores dS tiles:
/// step s + 2's Q and dO rows are asked of the L2 while step s computes and
/// step s + 1's are copied (H100: 6-8% off that backward at 64K-256K,
/// docs/performance.md; 4 steps measured slower).
constexpr int64_t kKeyPrefetchSteps = 2;

/// Why the backward's GPU kernels cannot take these sizes (the message
/// names the limit), or nullopt.
std::optional<std::string>
attentionGradLimitViolation(Type elem, int64_t groupSize, int64_t headDim,
                            int64_t valueDim, int64_t blockSize, int64_t topK);

/// The row arithmetic both backward kernels share (AttentionGradToGPU.cpp).
/// What one thread computes of a query's head rows: its row of the tile
/// (row = tid / threadsPerRow), its part of the row, the row's query slot,
/// and the row's head (rows past G read head G - 1 and are masked).
struct RowSite {
  Value row, part, slot, isHead, head;
  RowSite(ImplicitLocOpBuilder &b, const GradRows &rows, Value tid,
          Value firstHead, int64_t G);
  Value firstColumn(ImplicitLocOpBuilder &b, int64_t columns) const;
};

/// The exponent shift of a head row: lse log2 e, or +inf where the row has
/// no probability (a padding row where `isHead` is false, or lse = -inf: P
/// = 0 by the contract). A null `isHead` is a row with a head.
Value probabilityShift(ImplicitLocOpBuilder &b, Value lse,
                       Value isHead = Value());
/// This thread's columns of a score row: P from the raw scores and dS = P
/// (dP - D), both f32 vectors of `columns`; `visible` counts the tile's
/// keys the row's query sees from the thread's first column.
std::pair<Value, Value> probabilityAndGradient(ImplicitLocOpBuilder &b,
                                               Value scores, Value gradProbs,
                                               Value visible, Value shift,
                                               Value delta, float scale,
                                               int64_t columns);

} // namespace mlir::pisa::detail

namespace mlir::pisa {
class SparseAttentionGradKeysKernelOp;
} // namespace mlir::pisa

namespace mlir::pisa::detail {

/// The query lists (QueryLists.cpp), a stable counting sort of the
/// (query, attended block) pairs by block, built by five kernels before
/// the key kernel and launched by `launchQueryLists`: the index ([B, Hkv,
/// rows, Q + 4] i32; `operands`: selection, keys, queryOffset, index,
/// list and a packed batch's cu_seqlens) is zeroed; a thread per query
/// counts it in its block's row at its chunk's column; a warp per row
/// turns the row's counts into offsets and its length (column Q); a block
/// per batch x KV head scans the lengths into each row's start (columns
/// Q + 1 and Q + 2, low and high words); a warp per chunk writes its
/// queries into the lists in a fixed order. Column Q + 3 is the key
/// kernel's counter of a row's finished segments.
void launchQueryLists(PatternRewriter &rewriter, ImplicitLocOpBuilder &host,
                      SparseAttentionGradKeysKernelOp op, int64_t topK,
                      ArrayRef<KernelOperand> operands);

/// The backward's patterns: the query kernel's (AttentionGradToGPU.cpp),
/// then the key kernels' (AttentionGradKeys.cpp).
void populateAttentionGradPatterns(RewritePatternSet &patterns);
void populateAttentionGradKeysPatterns(RewritePatternSet &patterns);
/// Whether the backward's dq can come from the key kernel's dS tiles
/// (QueryGradFromScores.cpp): the register key kernel takes the sizes
/// (keyGradientsInRegisters) and the dq kernel's (a warp a query, dQ in a
/// lane's registers): G <= 16, d a multiple of 16 up to 128.
bool gradFromScoresFits(Type elem, int64_t groupSize, int64_t headDim,
                        int64_t valueDim, int64_t blockSize);

/// The D and dq-from-scores patterns (QueryGradFromScores.cpp).
void populateAttentionGradScoresPatterns(RewritePatternSet &patterns);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_ATTENTIONGRAD_H
