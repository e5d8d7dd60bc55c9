//===- KernelDecompositions.cpp - Each pisa op's kernel-level ops ---------===//
//
// What --pisa-decompose-to-kernels (lib/pisa/Transforms) makes of each
// user-level op through its KernelLoweringOpInterface model
// (KernelLowering.cpp): the kernel-level ops of PisaKernelOps.td,
// destination-passing on tensors, with tensor.empty for every intermediate
// (a scheduled hier_topk: the kernels of its schedule). One-shot
// bufferization then places the buffers and --convert-pisa-to-gpu builds
// the kernels. The model checks each op (schedule, GPU limits, the kernel
// variants) before any IR is created; preconditions on dynamic sizes
// become host cf.assert here, in tensor form.
//
//===----------------------------------------------------------------------===//

#include "Decompose.h"
#include "Kernels/KernelBuilder.h"
#include "Selection/TileScoring.h"
#include "Selection/WarpWalkMMA.h"

#include "../Common/LevelLayout.h"
#include "../Common/LoopBuilders.h"
#include "../Common/VarlenRows.h"

#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaDialect.h"
#include "pisa/IR/PisaInterfaces.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

/// What the kernels of one hier_topk are built for, decided up front.
namespace {
struct SelectionPlan {
  ScheduleKind kind;
  int64_t qTile;
  int64_t kvHeads, groupSize, headDim, topK, fanout, blockSize;
  float scale;
  /// The walk scores its levels on tensor cores from fragment planes.
  bool tensorCoreWalk;
  /// Queries, keys and selection are [B, T, H, X].
  bool tokenMajor;
  /// The pyramid is a cache laid out for this many keys.
  std::optional<int64_t> capacity;
  int64_t candidates() const { return fanout * topK; }
};
} // namespace

static FailureOr<SelectionPlan> planSelection(HierTopKOp op) {
  ScheduleAttr schedule = op.getScheduleAttr();
  if (!schedule)
    return op.emitOpError("has no #pisa.schedule: run --pisa-select-schedule "
                          "before --pisa-decompose-to-kernels");
  if (std::optional<std::string> why = gpuLimitViolation(op))
    return op.emitOpError() << *why;
  const unsigned heads = headDimIndex(op.getTokenMajor());
  ArrayRef<int64_t> q = op.getQueries().getType().getShape();
  ArrayRef<int64_t> k = op.getKeys().getType().getShape();
  SelectionPlan plan{schedule.getKind(),
                     schedule.getQTile(),
                     k[heads],
                     q[heads] / k[heads],
                     q[3],
                     int64_t(op.getTopk()),
                     int64_t(op.getBranching()),
                     int64_t(op.getBlockSize()),
                     op.getScaleOrDefault(),
                     false,
                     op.getTokenMajor(),
                     std::nullopt};
  if (std::optional<uint64_t> capacity = op.getCapacity())
    plan.capacity = int64_t(*capacity);
  plan.tensorCoreWalk =
      plan.kind == ScheduleKind::TwoStage &&
      canWalkWithMma(op.getQueries().getType().getElementType(), plan.groupSize,
                     plan.headDim, plan.fanout, plan.candidates());
  return plan;
}

/// a * b, dynamic when either is.
static int64_t staticProduct(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b)
             ? ShapedType::kDynamic
             : a * b;
}

/// Sizes of one hier_topk on the host, constants where static.
namespace {
struct Sizes {
  Value batch, heads, numQueries;
  LevelLayout layout; ///< of N
};
} // namespace

Value mlir::pisa::detail::empty(ImplicitLocOpBuilder &b,
                                ArrayRef<int64_t> shape, Type elem,
                                ArrayRef<Value> sizes) {
  return emptyLike(b, RankedTensorType::get(shape, elem), sizes);
}

void mlir::pisa::detail::requireSameExtent(ImplicitLocOpBuilder &b,
                                           StringRef opName, Value x,
                                           int64_t xDim, Value y, int64_t yDim,
                                           StringRef what) {
  auto dynamic = [](Value v, int64_t dim) {
    return cast<ShapedType>(v.getType()).isDynamicDim(dim);
  };
  if (dynamic(x, xDim) || dynamic(y, yDim))
    requireAtRuntime(
        b,
        cmp(b, arith::CmpIPredicate::eq, dimOf(b, x, xDim), dimOf(b, y, yDim)),
        opName + ": " + what);
}

void mlir::pisa::detail::requireResultSizes(ImplicitLocOpBuilder &b,
                                            StringRef opName,
                                            RankedTensorType type,
                                            ArrayRef<Value> sizes,
                                            StringRef what) {
  for (auto [i, size] : llvm::enumerate(sizes)) {
    const int64_t extent = type.getDimSize(i);
    if (!size || ShapedType::isDynamic(extent) ||
        matchPattern(size, m_Constant()))
      continue;
    requireAtRuntime(
        b, cmp(b, arith::CmpIPredicate::eq, size, indexConst(b, extent)),
        opName + ": the " + what + "'s dim " + std::to_string(i) + " (" +
            std::to_string(extent) + ") is not the size the operands give");
  }
}

/// What the verifier could not check because a size is dynamic, and the GPU
/// limits on those sizes (gpuLimitViolation checks the static ones): host
/// assertions that pisa-compile turns into a call's error.
static void requireSizes(ImplicitLocOpBuilder &b, HierTopKOp op,
                         const SelectionPlan &p, const Sizes &sizes) {
  Value queries = op.getQueries(), keys = op.getKeys();
  Value pyramid = op.getPyramid(), offset = op.getQueryOffset();
  auto dynamic = [](Value v, int64_t dim) {
    return cast<ShapedType>(v.getType()).isDynamicDim(dim);
  };
  auto require = [&](arith::CmpIPredicate pred, Value lhs, Value rhs,
                     const Twine &what) {
    requireAtRuntime(b, cmp(b, pred, lhs, rhs), "pisa.hier_topk: " + what);
  };
  using P = arith::CmpIPredicate;
  if (dynamic(queries, 0) || dynamic(keys, 0))
    require(P::eq, dimOf(b, keys, 0), sizes.batch,
            "the keys' batch differs from the queries'");
  if (dynamic(pyramid, 0) || dynamic(queries, 0))
    require(P::eq, dimOf(b, pyramid, 0), sizes.batch,
            "the pyramid's batch differs from the queries'");
  const unsigned tokens = tokenDimIndex(p.tokenMajor);
  if (p.capacity) {
    // A cache: the capacity's rows (the verifier checks static ones) and
    // N <= Ncap.
    const int64_t cacheRows =
        PyramidLayout(*p.capacity, p.blockSize, p.fanout).totalNodes();
    if (dynamic(pyramid, 2))
      require(P::eq, dimOf(b, pyramid, 2), indexConst(b, cacheRows),
              "the pyramid's rows are not the layout of its capacity (" +
                  std::to_string(*p.capacity) + " keys)");
    if (dynamic(keys, tokens))
      require(P::ule, sizes.layout.numKeys(), indexConst(b, *p.capacity),
              "N exceeds the pyramid cache's capacity of " +
                  std::to_string(*p.capacity) + " keys");
  } else if (dynamic(pyramid, 2) || dynamic(keys, tokens)) {
    require(P::eq, dimOf(b, pyramid, 2), sizes.layout.totalRows(),
            "the pyramid's rows are not the layout of the keys' N");
  }
  if (!dynamic(queries, tokens) && !dynamic(keys, tokens) &&
      !dynamic(queries, 0))
    return;
  // The query offset is bounded by the manifest for static shapes.
  Value numKeys = sizes.layout.numKeys();
  require(P::ule, sizes.numQueries, numKeys, "more queries than keys (Nq > N)");
  require(P::ule, offset,
          arith::SubIOp::create(
              b, numKeys, arith::MinUIOp::create(b, sizes.numQueries, numKeys)),
          "query_offset + Nq exceeds N");
  require(P::ule, b.createOrFold<arith::MulIOp>(sizes.batch, sizes.heads),
          indexConst(b, kMaxGPUGroups),
          "B * Hkv is above the GPU limit of " + std::to_string(kMaxGPUGroups) +
              " (grid y)");
  require(
      P::ule,
      arith::MulIOp::create(b, sizes.numQueries, indexConst(b, p.candidates())),
      indexConst(b, kMaxGPUPairs),
      "Nq * g * K is above the GPU limit of " + std::to_string(kMaxGPUPairs) +
          " (32-bit stage-2 pair indices)");
  require(P::ule, numKeys, indexConst(b, kMaxGPUKeys),
          "N is above the GPU limit of " + std::to_string(kMaxGPUKeys) +
              " (32-bit leaf indices)");
}

/// What the two-stage kernels read: a batch, or a packed varlen batch as a
/// batch of one (token-major [1, T, H, X] tensors, the packed pyramid
/// [1, R, Hkv, d], cu_seqlens given, leaves numbered over the batch).
namespace {
struct TwoStageInputs {
  Value queries, keys, pyramid, pyramidRows, offset, numKeys;
  Value cuQueries, cuKeys; ///< null for a batch
  Value batch, numQueries, numLeaves;
  int64_t staticLeaves; ///< M_1 (or the batch's leaves), kDynamic if unknown
};
} // namespace

/// The pyramid as the tensor-core walk reads it: its bf16 fragment planes.
/// A packed batch's pyramid is [1, R, Hkv, d]; the planes are head-major
/// either way.
static Value fragmentPlanes(ImplicitLocOpBuilder &b, const SelectionPlan &p,
                            const TwoStageInputs &in, int64_t batch,
                            Value heads) {
  const bool packedPyramid = bool(in.cuQueries);
  auto rows =
      cast<ShapedType>(in.pyramid.getType()).getShape()[packedPyramid ? 1 : 2];
  Value planes =
      empty(b, {batch, p.kvHeads, rows, 2 * p.headDim}, b.getBF16Type(),
            {in.batch, heads, in.pyramidRows, indexConst(b, 2 * p.headDim)});
  return FragmentPlanesKernelOp::create(b, TypeRange{planes.getType()},
                                        in.pyramid, planes, packedPyramid)
      .getResult(0);
}

/// The two-stage kernels: [fragment planes], walk, bucket, score tiles,
/// final selection. Returns the selection.
static Value decomposeTwoStage(ImplicitLocOpBuilder &b, const SelectionPlan &p,
                               const TwoStageInputs &in, Value selectionInit) {
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  ArrayRef<int64_t> qShape = cast<ShapedType>(in.queries.getType()).getShape();
  const int64_t gk = p.candidates();
  const int64_t batch = qShape[0];
  const int64_t numQueries = qShape[tokenDimIndex(p.tokenMajor)];
  const int64_t leaves = in.staticLeaves;
  const int64_t pairs = staticProduct(numQueries, gk);
  const int64_t tileCount =
      ShapedType::isDynamic(pairs) || ShapedType::isDynamic(leaves)
          ? ShapedType::kDynamic
          : ceilDiv(pairs, p.qTile) + leaves;
  Value cGk = indexConst(b, gk), heads = indexConst(b, p.kvHeads);
  Value numLeaves = in.numLeaves;
  Value numPairs = b.createOrFold<arith::MulIOp>(in.numQueries, cGk);
  Value tileBound = maxTiles(b, in.numQueries, numLeaves, gk, p.qTile);
  auto perQuery = [&](Type elem, bool slots) {
    if (slots)
      return empty(b, {batch, p.kvHeads, numQueries, gk}, elem,
                   {in.batch, heads, in.numQueries, cGk});
    return empty(b, {batch, p.kvHeads, numQueries}, elem,
                 {in.batch, heads, in.numQueries});
  };
  auto perGroup = [&](int64_t last, Value lastSize) {
    return empty(b, {batch, p.kvHeads, last}, i32, {in.batch, heads, lastSize});
  };

  Value pyramid =
      p.tensorCoreWalk ? fragmentPlanes(b, p, in, batch, heads) : in.pyramid;
  Value offset = in.offset, numKeys = in.numKeys;
  Value cuQ = in.cuQueries, cuK = in.cuKeys;
  Value contendersInit = perQuery(i32, true), countsInit = perQuery(i32, false);
  auto walk = WalkKernelOp::create(
      b, TypeRange{contendersInit.getType(), countsInit.getType()}, in.queries,
      pyramid, offset, numKeys, cuQ, cuK, contendersInit, countsInit, p.topK,
      p.blockSize, p.fanout, llvm::APFloat(p.scale), p.tensorCoreWalk,
      p.tokenMajor);
  Value contenders = walk.getResult(0), counts = walk.getResult(1);

  SmallVector<Value> sortInits{
      perGroup(leaves, numLeaves),
      perGroup(leaves, numLeaves),
      perGroup(leaves, numLeaves),
      perGroup(tileCount, tileBound),
      perGroup(tileCount, tileBound),
      empty(b, {batch, p.kvHeads}, i32, {in.batch, heads}),
      perGroup(pairs, numPairs),
      perGroup(leaves, numLeaves)};
  SmallVector<Type> sortTypes;
  for (Value v : sortInits)
    sortTypes.push_back(v.getType());
  auto bucket = BucketKernelOp::create(
      b, sortTypes, offset, contenders, counts, cuQ, cuK, sortInits[0],
      sortInits[1], sortInits[2], sortInits[3], sortInits[4], sortInits[5],
      sortInits[6], sortInits[7], p.topK, p.blockSize, p.qTile);
  ValueRange sorted = bucket.getResults();

  Value scoresInit = perQuery(f32, true);
  auto score = ScoreTilesKernelOp::create(
      b, TypeRange{scoresInit.getType()}, in.queries, in.keys, offset,
      /*leaf_count=*/sorted[0], /*leaf_start=*/sorted[1],
      /*tile_leaf=*/sorted[3], /*tile_first=*/sorted[4],
      /*num_tiles=*/sorted[5], /*sorted_pairs=*/sorted[6], cuQ, cuK, scoresInit,
      p.topK, p.blockSize, p.qTile, llvm::APFloat(p.scale), p.tokenMajor);

  return SelectFinalKernelOp::create(
             b, TypeRange{selectionInit.getType()}, offset, numKeys, contenders,
             counts, score.getResult(0), cuQ, cuK, selectionInit, p.topK,
             p.blockSize, p.tokenMajor)
      .getResult(0);
}

/// Replaces `op` by the kernels of its (checked) plan.
static void decomposeSelection(RewriterBase &rewriter, HierTopKOp op,
                               const SelectionPlan &p) {
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  Value queries = op.getQueries();
  const unsigned tokens = tokenDimIndex(p.tokenMajor);
  Sizes sizes{
      dimOf(b, queries, 0), indexConst(b, p.kvHeads), dimOf(b, queries, tokens),
      LevelLayout(b, dimOf(b, op.getKeys(), tokens), p.blockSize, p.fanout)};
  requireSizes(b, op, p, sizes);
  RankedTensorType selType = op.getSelection().getType();
  SmallVector<Value> selSizes{sizes.batch, sizes.heads, sizes.numQueries,
                              indexConst(b, p.topK)};
  if (p.tokenMajor)
    std::swap(selSizes[1], selSizes[2]);
  requireResultSizes(b, "pisa.hier_topk", selType, selSizes);
  Value selectionInit = emptyLike(b, selType, selSizes);
  Value selection;
  if (p.kind == ScheduleKind::SingleStage)
    selection =
        SelectSingleStageKernelOp::create(
            b, TypeRange{selType}, queries, op.getKeys(), op.getPyramid(),
            op.getQueryOffset(), selectionInit, p.topK, p.blockSize, p.fanout,
            llvm::APFloat(p.scale), p.tokenMajor,
            p.capacity ? b.getI64IntegerAttr(*p.capacity) : IntegerAttr())
            .getResult(0);
  else {
    const std::optional<PyramidLayout> &fixed = sizes.layout.fixed();
    TwoStageInputs in{queries,
                      op.getKeys(),
                      op.getPyramid(),
                      dimOf(b, op.getPyramid(), 2),
                      op.getQueryOffset(),
                      sizes.layout.numKeys(),
                      Value(),
                      Value(),
                      sizes.batch,
                      sizes.numQueries,
                      sizes.layout.numLeaves(),
                      fixed ? fixed->numLeaves() : ShapedType::kDynamic};
    selection = decomposeTwoStage(b, p, in, selectionInit);
  }
  rewriter.replaceOp(op, selection);
}

LogicalResult mlir::pisa::detail::verifySelectionPlan(HierTopKOp op) {
  return failure(failed(planSelection(op)));
}

void mlir::pisa::detail::decompose(RewriterBase &rewriter, HierTopKOp op) {
  FailureOr<SelectionPlan> plan = planSelection(op);
  assert(succeeded(plan) && "decomposing an unverified hier_topk");
  decomposeSelection(rewriter, op, *plan);
}

void mlir::pisa::detail::decompose(RewriterBase &rewriter, PyramidBuildOp op) {
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  Value keys = op.getKeys();
  const bool tokenMajor = op.getTokenMajor();
  RankedTensorType type = op.getPyramid().getType();
  LevelLayout layout(b, dimOf(b, keys, tokenDimIndex(tokenMajor)),
                     op.getBlockSize(), op.getBranching());
  // A static row count with a dynamic N must be N's: checked at run time.
  int64_t rows = type.getShape()[2];
  if (!layout.fixed() && !ShapedType::isDynamic(rows))
    requireAtRuntime(b,
                     cmp(b, arith::CmpIPredicate::eq, layout.totalRows(),
                         indexConst(b, rows)),
                     "pisa.pyramid_build: the pyramid's " +
                         std::to_string(rows) +
                         " rows are not the layout of the keys' N");
  SmallVector<Value> sizes{dimOf(b, keys, 0),
                           dimOf(b, keys, headDimIndex(tokenMajor)),
                           layout.totalRows(), dimOf(b, keys, 3)};
  // The rows are checked above against N's layout.
  requireResultSizes(b, "pisa.pyramid_build", type,
                     {sizes[0], sizes[1], Value(), sizes[3]});
  Value init = emptyLike(b, type, sizes);
  rewriter.replaceOp(op, PyramidKernelOp::create(b, TypeRange{type}, keys, init,
                                                 op.getBlockSize(),
                                                 op.getBranching(), tokenMajor)
                             .getResult(0));
}

/// pisa.pyramid_append: the cache is the kernel's destination, updated in
/// place (bufferization copies it only where the old cache is still used).
void mlir::pisa::detail::decompose(RewriterBase &rewriter, PyramidAppendOp op) {
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  // Every per-sequence operand has the cache's B (a mismatch of dynamic
  // sizes would read past one of them).
  Value pyramid = op.getPyramid(), table = op.getBlockTable();
  Value batch = dimOf(b, pyramid, 0);
  auto require = [&](Value v, StringRef what) {
    if (cast<ShapedType>(v.getType()).isDynamicDim(0) ||
        cast<ShapedType>(pyramid.getType()).isDynamicDim(0))
      requireAtRuntime(b,
                       cmp(b, arith::CmpIPredicate::eq, dimOf(b, v, 0), batch),
                       "pisa.pyramid_append: the " + what +
                           " batch differs from the cache's");
  };
  require(table ? table : op.getKeys(), table ? "block_table's" : "keys'");
  require(op.getFrom(), "from's");
  require(op.getTo(), "to's");
  rewriter.replaceOp(op, PyramidAppendKernelOp::create(
                             b, TypeRange{op.getType()}, op.getKeys(),
                             op.getFrom(), op.getTo(), table, pyramid,
                             op.getBlockSize(), op.getBranching())
                             .getResult(0));
}

void mlir::pisa::detail::requireGroupsFitGrid(ImplicitLocOpBuilder &b,
                                              StringRef opName, Value batch,
                                              int64_t kvHeads) {
  requireAtRuntime(b,
                   cmp(b, arith::CmpIPredicate::ule,
                       arith::MulIOp::create(b, batch, indexConst(b, kvHeads)),
                       indexConst(b, kMaxGPUGroups)),
                   opName + ": B * Hkv is above the GPU limit of " +
                       std::to_string(kMaxGPUGroups) + " (grid y)");
}

/// pisa.decode_select: the single-stage decode kernel; B on the host (the
/// lengths stay on the device, where the kernel checks them).
void mlir::pisa::detail::decompose(RewriterBase &rewriter, DecodeSelectOp op) {
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  Value queries = op.getQueries();
  Value batch = dimOf(b, queries, 0);
  auto dynamic = [](Value v) {
    return cast<ShapedType>(v.getType()).isDynamicDim(0);
  };
  auto require = [&](Value v, StringRef what) {
    if (dynamic(v) || dynamic(queries))
      requireAtRuntime(b,
                       cmp(b, arith::CmpIPredicate::eq, dimOf(b, v, 0), batch),
                       "pisa.decode_select: the " + what +
                           " batch differs from the queries'");
  };
  Value table = op.getBlockTable();
  if (table)
    require(table, "block_table's");
  else
    require(op.getKeys(), "keys'");
  require(op.getPyramid(), "pyramid's");
  require(op.getSeqLens(), "seq_lens'");
  if (dynamic(queries))
    requireGroupsFitGrid(b, "pisa.decode_select", batch,
                         op.getPyramid().getType().getShape()[1]);
  RankedTensorType type = op.getSelection().getType();
  SmallVector<Value> sizes{batch, Value(), dimOf(b, queries, 2), Value()};
  requireResultSizes(b, "pisa.decode_select", type, sizes);
  Value init = emptyLike(b, type, sizes);
  rewriter.replaceOp(op, SelectDecodeKernelOp::create(
                             b, TypeRange{type}, queries, op.getKeys(),
                             op.getPyramid(), op.getSeqLens(), table, init,
                             op.getTopk(), op.getBlockSize(), op.getBranching(),
                             llvm::APFloat(op.getScaleOrDefault()))
                             .getResult(0));
}

/// lse_score: one kernel op. Sizes the verifier could not compare (dynamic)
/// and a query offset known only at run time are host assertions; the
/// candidates are device data the kernel reads as they are (semantics.md
/// section 2 scores every value).
void mlir::pisa::detail::decompose(RewriterBase &rewriter, LseScoreOp op) {
  using P = arith::CmpIPredicate;
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  Value queries = op.getQueries(), children = op.getChildren();
  Value candidates = op.getCandidates(), offset = op.getQueryOffset();
  auto dynamic = [](Value v, int64_t dim) {
    return cast<ShapedType>(v.getType()).isDynamicDim(dim);
  };
  auto requireSame = [&](Value x, int64_t dim, Value y, StringRef what) {
    requireSameExtent(b, "pisa.lse_score", x, dim, y, dim, what);
  };
  requireSame(children, 0, queries,
              "the children's batch differs from the queries'");
  requireSame(candidates, 0, queries,
              "the candidates' batch differs from the queries'");
  requireSame(candidates, 2, queries,
              "the candidates' Nq differs from the queries'");
  RankedTensorType type = op.getScores().getType();
  Value batch = dimOf(b, queries, 0), numQueries = dimOf(b, queries, 2);
  const int64_t kvHeads = op.getChildren().getType().getShape()[1];
  if (dynamic(queries, 0))
    requireGroupsFitGrid(b, "pisa.lse_score", batch, kvHeads);
  if (dynamic(queries, 2))
    requireAtRuntime(b, cmp(b, P::ule, numQueries, indexConst(b, kMaxGPUKeys)),
                     "pisa.lse_score: Nq is above the GPU limit of " +
                         std::to_string(kMaxGPUKeys) + " (grid x)");
  if (!matchPattern(offset, m_Constant()))
    requireAtRuntime(b,
                     arith::AndIOp::create(
                         b, cmp(b, P::sge, offset, indexConst(b, 0)),
                         cmp(b, P::sle, offset, indexConst(b, kMaxGPUKeys))),
                     "pisa.lse_score: query_offset is outside [0, " +
                         std::to_string(kMaxGPUKeys) + "]");
  SmallVector<Value> sizes{batch, Value(), numQueries, dimOf(b, candidates, 3)};
  requireResultSizes(b, "pisa.lse_score", type, sizes);
  Value init = emptyLike(b, type, sizes);
  rewriter.replaceOp(
      op, LseScoreKernelOp::create(b, TypeRange{type}, queries, children,
                                   candidates, offset, init, op.getLevel(),
                                   op.getBlockSize(), op.getBranching(),
                                   llvm::APFloat(op.getScaleOrDefault()))
              .getResult(0));
}

Value mlir::pisa::detail::requireVarlenSizes(ImplicitLocOpBuilder &b,
                                             StringRef opName,
                                             StringRef cuKeysName, Value cuKeys,
                                             Value keys, int64_t blockSize,
                                             Value cuQueries, Value queries) {
  using P = arith::CmpIPredicate;
  auto require = [&](Value ok, const Twine &what) {
    requireAtRuntime(b, ok, opName + ": " + what);
  };
  Value zero = indexConst(b, 0);
  require(cmp(b, P::sge, dimOf(b, cuKeys, 0), indexConst(b, 1)),
          cuKeysName + " is empty (it holds B + 1 >= 1 entries)");
  Value numSeqs =
      arith::SubIOp::create(b, dimOf(b, cuKeys, 0), indexConst(b, 1));
  Value numKeyRows = dimOf(b, keys, 0);
  auto noneOr = [&](Value rows) {
    return arith::OrIOp::create(b, cmp(b, P::ne, numSeqs, zero),
                                cmp(b, P::eq, rows, zero));
  };
  require(noneOr(numKeyRows),
          cuKeysName + " has no sequence but there are key rows");
  if (cuQueries) {
    require(cmp(b, P::eq, dimOf(b, cuQueries, 0), dimOf(b, cuKeys, 0)),
            "cu_seqlens_q and cu_seqlens_k give different B");
    require(noneOr(dimOf(b, queries, 0)),
            "cu_seqlens_q has no sequence but there are query rows");
  }
  return firstPyramidRow(b, numKeyRows, numSeqs, blockSize);
}

void mlir::pisa::detail::decompose(RewriterBase &rewriter,
                                   PyramidBuildVarlenOp op) {
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  Value keys = op.getKeys();
  RankedTensorType type = op.getPyramid().getType();
  Value rows = requireVarlenSizes(b, "pisa.pyramid_build_varlen", "cu_seqlens",
                                  op.getCuSeqlens(), keys, op.getBlockSize());
  // The result is sized from the inputs; the rule only checks a static R.
  if (!type.isDynamicDim(0))
    requireAtRuntime(b,
                     cmp(b, arith::CmpIPredicate::eq, rows,
                         indexConst(b, type.getDimSize(0))),
                     "pisa.pyramid_build_varlen: the pyramid's " +
                         std::to_string(type.getDimSize(0)) +
                         " rows are not 2 floor(Tk / C) + 32 B");
  Value init = emptyLike(b, type, {rows, Value(), Value()});
  rewriter.replaceOp(op, PyramidVarlenKernelOp::create(
                             b, TypeRange{type}, keys, op.getCuSeqlens(), init,
                             op.getBlockSize(), op.getBranching())
                             .getResult(0));
}

Value mlir::pisa::detail::asBatchOfOne(ImplicitLocOpBuilder &b, Value packed) {
  auto type = cast<RankedTensorType>(packed.getType());
  ArrayRef<int64_t> s = type.getShape();
  auto expanded =
      RankedTensorType::get({1, s[0], s[1], s[2]}, type.getElementType());
  return tensor::ExpandShapeOp::create(b, expanded, packed, {{0, 1}, {2}, {3}},
                                       {b.getIndexAttr(1), dimOf(b, packed, 0),
                                        b.getIndexAttr(s[1]),
                                        b.getIndexAttr(s[2])});
}

/// Two-stage hier_topk_varlen: the batched two-stage kernel ops on the
/// packed batch seen as a batch of one, token-major, with cu_seqlens
/// (docs/gpu.md, "Varlen").
static Value decomposeTwoStageVarlen(ImplicitLocOpBuilder &b,
                                     HierTopKVarlenOp op, Value pyramidRows) {
  ArrayRef<int64_t> q = op.getQueries().getType().getShape();
  ArrayRef<int64_t> k = op.getKeys().getType().getShape();
  ScheduleAttr schedule = op.getScheduleAttr();
  SelectionPlan plan{ScheduleKind::TwoStage,
                     schedule.getQTile(),
                     k[1],
                     q[1] / k[1],
                     q[2],
                     int64_t(op.getTopk()),
                     int64_t(op.getBranching()),
                     int64_t(op.getBlockSize()),
                     op.getScaleOrDefault(),
                     /*tensorCoreWalk=*/false,
                     /*tokenMajor=*/true,
                     /*capacity=*/std::nullopt};
  plan.tensorCoreWalk =
      canWalkWithMma(op.getQueries().getType().getElementType(), plan.groupSize,
                     plan.headDim, plan.fanout, plan.candidates());
  Value numKeyRows = dimOf(b, op.getKeys(), 0);
  Value numQueryRows = dimOf(b, op.getQueries(), 0);
  Value numSeqs = arith::SubIOp::create(b, dimOf(b, op.getCuSeqlensK(), 0),
                                        indexConst(b, 1));
  // Leaves over the batch: sequence s's from floor(cu_k[s] / C) + s.
  Value numLeaves = arith::AddIOp::create(
      b, arith::DivUIOp::create(b, numKeyRows, indexConst(b, plan.blockSize)),
      numSeqs);
  requireAtRuntime(
      b,
      cmp(b, arith::CmpIPredicate::ule,
          arith::MulIOp::create(b, numQueryRows,
                                indexConst(b, plan.candidates())),
          indexConst(b, kMaxGPUPairs)),
      "pisa.hier_topk_varlen: Tq * g * K is above the GPU limit of " +
          std::to_string(kMaxGPUPairs) + " (32-bit stage-2 pair indices)");
  int64_t staticLeaves = ShapedType::kDynamic;
  int64_t cuSize = op.getCuSeqlensK().getType().getDimSize(0);
  if (!ShapedType::isDynamic(k[0]) && !ShapedType::isDynamic(cuSize))
    staticLeaves = k[0] / plan.blockSize + cuSize - 1;
  TwoStageInputs in{asBatchOfOne(b, op.getQueries()),
                    asBatchOfOne(b, op.getKeys()),
                    asBatchOfOne(b, op.getPyramid()),
                    pyramidRows,
                    indexConst(b, 0),
                    numKeyRows,
                    op.getCuSeqlensQ(),
                    op.getCuSeqlensK(),
                    indexConst(b, 1),
                    numQueryRows,
                    numLeaves,
                    staticLeaves};
  // The destination is the packed [Tq, Hkv, K] seen as a batch of one, so
  // that the result is the caller's buffer itself (the reshapes fold).
  requireResultSizes(b, "pisa.hier_topk_varlen", op.getSelection().getType(),
                     {numQueryRows, Value(), Value()});
  Value init = asBatchOfOne(b, emptyLike(b, op.getSelection().getType(),
                                         {numQueryRows, Value(), Value()}));
  Value selection = decomposeTwoStage(b, plan, in, init);
  return tensor::CollapseShapeOp::create(
      b, op.getSelection().getType(), selection,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}});
}

/// hier_topk_varlen: the two-stage kernels when its schedule says so, else
/// the single-stage kernel (docs/gpu.md, "Varlen").
void mlir::pisa::detail::decompose(RewriterBase &rewriter,
                                   HierTopKVarlenOp op) {
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  Value rows = requireVarlenSizes(
      b, "pisa.hier_topk_varlen", "cu_seqlens_k", op.getCuSeqlensK(),
      op.getKeys(), op.getBlockSize(), op.getCuSeqlensQ(), op.getQueries());
  requireAtRuntime(
      b, cmp(b, arith::CmpIPredicate::eq, dimOf(b, op.getPyramid(), 0), rows),
      "pisa.hier_topk_varlen: the pyramid's rows are not "
      "2 floor(Tk / C) + 32 B");
  ScheduleAttr schedule = op.getScheduleAttr();
  if (schedule && schedule.getKind() == ScheduleKind::TwoStage) {
    rewriter.replaceOp(op, decomposeTwoStageVarlen(b, op, rows));
    return;
  }
  RankedTensorType type = op.getSelection().getType();
  SmallVector<Value> sizes{dimOf(b, op.getQueries(), 0), Value(), Value()};
  requireResultSizes(b, "pisa.hier_topk_varlen", type, sizes);
  Value init = emptyLike(b, type, sizes);
  rewriter.replaceOp(op, SelectSingleStageVarlenKernelOp::create(
                             b, TypeRange{type}, op.getQueries(), op.getKeys(),
                             op.getPyramid(), op.getCuSeqlensQ(),
                             op.getCuSeqlensK(), init, op.getTopk(),
                             op.getBlockSize(), op.getBranching(),
                             llvm::APFloat(op.getScaleOrDefault()))
                             .getResult(0));
}
