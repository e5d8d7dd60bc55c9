//===- QueryKernels.h - What the selection kernels share --------*- C++ -*-===//
//
// The pieces the selection patterns (SingleStageToGPU.cpp,
// TwoStageToGPU.cpp) share: a kernel op's sizes, a query warp's or
// thread's coordinates, its sequence (a batch index or a packed varlen
// row) and the prologue of the walk kernels, the warp scorers, and the base
// pattern of every kernel op.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_SELECTION_QUERYKERNELS_H
#define PISA_LIB_CONVERSION_PISATOGPU_SELECTION_QUERYKERNELS_H

#include "Kernels/KernelBuilder.h"
#include "Selection/DeviceSelection.h"
#include "Selection/LeafScoreMMA.h"
#include "Selection/WarpWalkMMA.h"

#include "../Common/LevelLayout.h"
#include "../Common/NodeScore.h"

#include "pisa/Analysis/GPUTarget.h"
#include "pisa/IR/PisaAttrs.h"

#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>

namespace mlir::pisa::detail {

constexpr int64_t kQueryThreads = 128;

/// Walk kernels give each query a warp: its lanes split every dot product
/// over d and run the (cheap, uniform) selection logic redundantly.
constexpr int64_t kLanes = 32;

constexpr int64_t kWarpQueries = kQueryThreads / kLanes;

/// The single-stage kernels give a query a block of 16 warps (decode,
/// speculative decode: at most 4 queries) that split each level's and the
/// leaves' scoring, else one warp (four per block; there the queries fill
/// the GPU).
constexpr int64_t kDecodeWarps = kDecodeBlockThreads / kLanes;
constexpr int64_t kMaxDecodeQueries = 4;

/// Sizes of a selection kernel, read from its op. B, N and Nq may be
/// dynamic: kernels read Nq from their buffers and N from "numKeys" (or the
/// keys' size); a constant N stays a constant, so walks unroll.
struct Problem {
  int64_t kvHeads, groupSize, headDim;
  int64_t topK, fanout, blockSize;
  float scale;
  MemRefType queries;
  std::optional<int64_t> numKeys; ///< N when it is a constant
  /// A single-stage op's kernel_config (null for the other kernels).
  KernelConfigAttr config;
  int64_t candidates() const { return fanout * topK; }
  bool dynamicKeys() const { return !numKeys; }
};

/// A single-stage kernel's decisions, as p.config says: whether a query's
/// block of warps (warpsPerQuery > 1) walks with one candidate per lane
/// (walk = lanes, buildBlockLaneSelection), whether that walk scores the
/// leaves on tensor cores (variant mma_sync), and its levels too
/// (level_variant mma_sync): the query's load (lane groups or mma
/// fragments) and the kernel's body follow these decisions alike.
bool usesBlockLaneWalk(const Problem &p, int64_t warpsPerQuery);
bool scoresLeavesWithMma(const Problem &p);
bool scoresBlockLevelsWithMma(const Problem &p, int64_t warpsPerQuery);

/// The memref type of a kernel op's operand (buffer form).
MemRefType bufferType(Value v);

/// The problem of a kernel op reading `queries` [B, Hq, Nq, d] for KV heads
/// of `perKvHead` [B, Hkv, ...].
Problem problemOf(Value queries, Value perKvHead, int64_t topK, int64_t fanout,
                  int64_t blockSize, float scale, Value numKeys);

/// The "numKeys" parameter of kernels that take no keys buffer: only when N
/// is dynamic (a static N stays a constant, so their walks unroll).
SmallVector<KernelParam> keyCountParam(const Problem &p, Type index);

/// N inside a kernel built with keyCountParam.
Value keyCount(ImplicitLocOpBuilder &b, const Kernel &kernel, const Problem &p);

/// Launch operands for keyCountParam.
SmallVector<KernelOperand> keyCountOperand(const Problem &p, Value numKeys);

/// What a per-query kernel without a keys buffer is told about the keys:
/// on a packed batch (cuQueries given) both cu_seqlens and Tk
/// ("numKeyRows"), else keyCountParam. `numKeys` is the op's num_keys (N,
/// or Tk for a packed batch).
SmallVector<KernelParam> keyParams(const Problem &p, Type index,
                                   Value cuQueries, Value cuKeys);
SmallVector<KernelOperand> keyOperands(const Problem &p, Value numKeys,
                                       Value cuQueries, Value cuKeys);

/// Thread coordinates of a per-(query, KV head) kernel, and a guard that
/// the query exists. Returns {batch, kvHead, query, inRange}.
SmallVector<Value> queryThread(ImplicitLocOpBuilder &b, const Problem &p,
                               Value numQueries);

/// Warp coordinates of a per-(query, KV head) warp kernel:
/// {batch, kvHead, query, inRange, lane, warp}. inRange is uniform per
/// warp. A kernel of `warpsPerQuery` > 1 gives each query a block of that
/// many warps (query = block x, warp = the warp within it); else four
/// queries per block, a warp each (warp = 0).
SmallVector<Value> queryWarp(ImplicitLocOpBuilder &b, const Problem &p,
                             Value numQueries, int64_t warpsPerQuery = 1);

/// Score operands for a warp kernel: lanes split every dot product over d
/// (coalesced row loads, one butterfly per dot). Giving each head its own
/// lanes instead was measured slower on the H200 (walk 0.55 -> 0.77 ms at
/// N = 4K: strided query rows, long FMA chains); see CHANGELOG.md's performance
/// history.
ScoreOperands warpOperands(Value queries, Value children, const Problem &p,
                           Value lane);

/// The warp's way to score a node of `children`: from the query held in
/// registers when it fits, else lanes splitting each head's dot product.
struct WarpScorer {
  std::optional<WarpQuery> query;
  ScoreOperands operands;
  QuerySite site;
  Value children;
  float scale;
  /// Children whose rows are loaded at once (buildWarpGroupScore).
  int64_t rowsInFlight = 1;
  Value operator()(ImplicitLocOpBuilder &b, const ChildLevel &level,
                   Value node) const {
    if (query)
      return buildWarpGroupScore(b, *query, children, site, level, node, scale,
                                 rowsInFlight);
    return buildGroupScore(b, operands, site, level, node);
  }
};

/// The scorer of a warp holding `query` (when it fits) for `children`.
WarpScorer warpScorer(const std::optional<WarpQuery> &query, Value queries,
                      Value children, const Problem &p, Value lane,
                      const QuerySite &site);

/// Lane 0 of the warp (which writes what all lanes computed alike).
Value isLaneZero(ImplicitLocOpBuilder &b, Value lane);

/// The kernel's private scratch arrays, if it has them (the tensor-core
/// walk keeps its state in registers and has none).
std::optional<QueryScratch> scratchOf(const Kernel &kernel);

/// The private scratch of a SIMT walk (QueryScratch).
SmallVector<Type> scratchTypes(MLIRContext *ctx, const Problem &p);

/// The workgroup buffers where a query's block of `warpsPerQuery` warps
/// exchanges scores and ranks (none for a warp alone); forEachQueryWarp
/// binds them to QueryScratch's fields the same way.
SmallVector<Type> exchangeTypes(MLIRContext *ctx, const Problem &p,
                                int64_t warpsPerQuery);

/// Emits `body` under `if (cond)` and a gpu.return after it.
void guarded(ImplicitLocOpBuilder &b, Value cond,
             llvm::function_ref<void(ImplicitLocOpBuilder &)> body);

/// The sequence of a query warp: its row of the [B, H, T, X] buffers (or
/// views), its position, N and where its keys and pyramid rows start. A
/// batch index is one sequence; a packed varlen batch finds its own.
struct WarpSequence {
  Value batch, query, position, numKeys;
  Value firstKey;        ///< first key row (0 for a batch)
  Value firstPyramidRow; ///< null: row 0
  Value valid;           ///< null: always; else the body runs only if it holds
  /// null: the pyramid has N's layout; else a cache laid out for this many
  /// keys (a per-warp layout is built with it).
  Value capacity;
};

using WarpSequenceOf = llvm::function_ref<WarpSequence(ImplicitLocOpBuilder &,
                                                       Value batch, Value row)>;

/// One query's warp inside a walk kernel: where it is, its private scratch
/// and its query rows (in registers when they fit).
struct WarpSite {
  QuerySite site;
  Value lane, bt;
  /// The warp within the query's block (0 for a warp alone); lane 0 of
  /// warp 0 writes what all of them computed alike.
  Value warp;
  Value numKeys, firstKey;
  std::optional<QueryScratch> scratch;
  std::optional<WarpQuery> query;
  /// A fragments when the walk's levels score on tensor cores.
  std::optional<MmaWalkQuery> mmaQuery;
  /// A fragments of a query's block that scores levels and leaves on
  /// tensor cores (scoresBlockLevelsWithMma), loaded once for both.
  std::optional<LeafMmaQuery> leafQuery;
};

using QueryWarpBody = llvm::function_ref<void(
    ImplicitLocOpBuilder &, const WarpSite &, const LevelLayout &)>;

/// What a warp whose sequence breaks a rule does instead (site and lane).
using InvalidQueryBody = llvm::function_ref<void(
    ImplicitLocOpBuilder &, const QuerySite &, Value lane)>;

/// Emits the prologue shared by the walk kernels (warp coordinates, the
/// in-range guard, the warp's sequence and its layout, b_t, the query: A
/// fragments when `mmaLevels` (the levels score on tensor cores), else f32
/// rows in registers when they fit) and `body` under the guard. A batch
/// gives its one `batchLayout` (built before the guard); a packed batch
/// builds each warp's from its sequence.
void forEachQueryWarp(ImplicitLocOpBuilder &b, const Kernel &kernel,
                      const Problem &p, Value queries, bool mmaLevels,
                      const LevelLayout *batchLayout, WarpSequenceOf sequenceOf,
                      QueryWarpBody body, InvalidQueryBody invalid = nullptr,
                      int64_t warpsPerQuery = 1);

/// Whether this thread writes a query's results: lane 0 of warp 0.
Value isQueryWriter(ImplicitLocOpBuilder &b, const WarpSite &w);

/// The sequence of a batched kernel's warp: batch `batch`, N = `numKeys`,
/// position offset + row.
WarpSequence batchedSequence(ImplicitLocOpBuilder &b, Value batch, Value row,
                             Value offset, Value numKeys);

/// B * Hkv on the host, for grid y.
Value groupsOf(ImplicitLocOpBuilder &b, Value perKvHead, int64_t kvHeads);

/// Base of the patterns: they lower the buffer form only (bufferization
/// comes first), build the kernels at the end of @pisa_kernels and the
/// launches where the op was, then erase it.
template <typename OpTy> struct KernelOpPattern : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const final {
    if (!op.hasPureBufferSemantics())
      return rewriter.notifyMatchFailure(op, "expected the buffer form");
    viewTokenMajorOperands(rewriter, op);
    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder host(op.getLoc(), rewriter);
    lower(op, rewriter, host);
    rewriter.eraseOp(op);
    return success();
  }
  virtual void lower(OpTy op, PatternRewriter &rewriter,
                     ImplicitLocOpBuilder &host) const = 0;
};

/// Writes the K entries kInvalidInput of a row of `selection`.
void storeInvalidRow(ImplicitLocOpBuilder &b, Value selection, int64_t topK,
                     ValueRange row);

/// The sequence of packed query row `row` for a walk kernel (keys or
/// numKeyRows give Tk).
WarpSequence packedSequence(ImplicitLocOpBuilder &b, Value cuQ, Value cuK,
                            Value numQueryRows, Value numKeyRows, Value batch,
                            Value row, int64_t blockSize);

/// The single-stage patterns (SingleStageToGPU.cpp), for
/// populateSelectionKernelsToGPUPatterns.
void addSingleStagePatterns(RewritePatternSet &patterns);

/// The lse_score pattern (LseScoreToGPU.cpp), for
/// populateSelectionKernelsToGPUPatterns.
void addLseScorePatterns(RewritePatternSet &patterns);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_SELECTION_QUERYKERNELS_H
