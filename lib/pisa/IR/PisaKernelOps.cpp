//===- PisaKernelOps.cpp - Kernel-level op verifiers and effects ----------===//
//
// The kernel-level ops are written by --pisa-decompose-to-kernels, whose
// plan already checked the contract; their verifiers check what keeps a
// hand-written or transformed op lowerable: one form (tensors or buffers),
// one batch, and the sizes the kernels are built from. The backward's
// kernel ops are in PisaGradKernelOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "ContractChecks.h"
#include "KernelOpChecks.h"
#include "pisa/Analysis/GPUTarget.h"
#include "pisa/Analysis/TensorCoreWalk.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

ArrayRef<int64_t> mlir::pisa::detail::shapeOf(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}

SmallVector<int64_t, 4> mlir::pisa::detail::tokenShapeOf(Value v,
                                                         bool tokenMajor) {
  ArrayRef<int64_t> s = shapeOf(v);
  return {s[0], s[headDimIndex(tokenMajor)], s[tokenDimIndex(tokenMajor)],
          s[3]};
}

LogicalResult
mlir::pisa::detail::checkTiledDims(Operation *op,
                                   ArrayRef<TiledOperand> operands) {
  for (const TiledOperand &o : operands) {
    auto type = cast<ShapedType>(o.value.getType());
    const unsigned last = type.getRank() - 1;
    SmallVector<unsigned, 3> dims;
    switch (o.kind) {
    case Tiled::Tokens:
      dims = {type.getRank() == 4 ? headDimIndex(o.tokenMajor) : 1u, last};
      break;
    case Tiled::PerKvHead:
      dims = {1};
      if (type.getRank() == 4)
        dims.push_back(last);
      break;
    case Tiled::Rows:
      dims = {last};
      break;
    case Tiled::PagePool:
      dims = {1, 2, 3};
      break;
    }
    for (unsigned dim : dims)
      if (type.isDynamicDim(dim))
        return op->emitOpError() << "expected a static dim " << dim
                                 << " (the kernels' tiling) in " << o.name
                                 << " but got " << o.value.getType();
  }
  return success();
}

/// Emits "expected <what> of <a> (x) to be twice <b> (y)" when both are
/// static and x != 2 y (compared without forming 2 y, which may overflow).
static LogicalResult twiceDim(Operation *op, StringRef what, StringRef aName,
                              int64_t a, StringRef bName, int64_t b) {
  if (ShapedType::isDynamic(a) || ShapedType::isDynamic(b) ||
      (a % 2 == 0 && a / 2 == b))
    return success();
  return op->emitOpError() << "expected " << what << " of " << aName << " ("
                           << a << ") to be twice " << bName << " (" << b
                           << ")";
}

/// The attributes the contract bounds (C, g, K, the scale, q_tile), with
/// the user-level ops' diagnostics: every kernel op has some of them.
static LogicalResult verifyKernelAttributes(Operation *op) {
  auto integer = [&](StringRef name) -> std::optional<int64_t> {
    if (auto attr = op->getAttrOfType<IntegerAttr>(name))
      return attr.getInt();
    return std::nullopt;
  };
  if (std::optional<int64_t> blockSize = integer("block_size"))
    if (failed(checkBlockSize(op, *blockSize)))
      return failure();
  if (std::optional<int64_t> branching = integer("branching"))
    if (failed(checkBranching(op, *branching)))
      return failure();
  if (std::optional<int64_t> topK = integer("topk"))
    if (failed(checkTopK(op, *topK)))
      return failure();
  if (std::optional<int64_t> qTile = integer("q_tile");
      qTile && (*qTile < 1 || *qTile > kMaxQueryTile))
    return op->emitOpError() << "expected q_tile in [1, " << kMaxQueryTile
                             << "] but got " << *qTile;
  if (Attribute config = op->getAttr(kKernelConfigAttrName);
      config && !isa<KernelConfigAttr>(config))
    return op->emitOpError()
           << "expected " << kKernelConfigAttrName
           << " to be a #pisa.kernel_config but got " << config;
  return checkScale(op, op->getAttrOfType<FloatAttr>("scale"));
}

LogicalResult mlir::pisa::detail::verifyKernelOp(Operation *op, bool packed,
                                                 Value pagePool) {
  if (failed(verifyKernelAttributes(op)))
    return failure();
  bool tensors = false, buffers = false;
  int64_t batch = ShapedType::kDynamic;
  for (Value v : op->getOperands()) {
    auto type = dyn_cast<ShapedType>(v.getType());
    if (!type)
      continue;
    (isa<RankedTensorType>(type) ? tensors : buffers) = true;
    if (packed || type.getRank() == 1 || (pagePool && v == pagePool))
      continue; // token counts, cu_seqlens (B + 1) or pages, not a batch
    if (failed(checkSameDim(op, "batch B (dim 0)", "an operand",
                            type.getDimSize(0), "the first operand's", batch)))
      return failure();
    if (ShapedType::isDynamic(batch))
      batch = type.getDimSize(0);
  }
  if (tensors && buffers)
    return op->emitOpError("expected all operands to be tensors or all to be "
                           "buffers but got both");
  return success();
}

/// Reads of the inputs and writes of the destinations, in buffer form.
static void kernelEffects(
    Operation *op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  auto dps = cast<DestinationStyleOpInterface>(op);
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    if (dps.isDpsInit(&operand))
      effects.emplace_back(MemoryEffects::Write::get(), &operand,
                           SideEffects::DefaultResource::get());
    else
      effects.emplace_back(MemoryEffects::Read::get(), &operand,
                           SideEffects::DefaultResource::get());
  }
}

#define PISA_KERNEL_EFFECTS(Op)                                                \
  void Op::getEffects(                                                         \
      SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>      \
          &effects) {                                                          \
    kernelEffects(*this, effects);                                             \
  }
PISA_KERNEL_EFFECTS(PyramidKernelOp)
PISA_KERNEL_EFFECTS(FragmentPlanesKernelOp)
PISA_KERNEL_EFFECTS(WalkKernelOp)
PISA_KERNEL_EFFECTS(BucketKernelOp)
PISA_KERNEL_EFFECTS(ScoreTilesKernelOp)
PISA_KERNEL_EFFECTS(SelectFinalKernelOp)
PISA_KERNEL_EFFECTS(SelectSingleStageKernelOp)
PISA_KERNEL_EFFECTS(PyramidVarlenKernelOp)
PISA_KERNEL_EFFECTS(SelectSingleStageVarlenKernelOp)
PISA_KERNEL_EFFECTS(SelectDecodeKernelOp)
PISA_KERNEL_EFFECTS(SparseAttentionKernelOp)
PISA_KERNEL_EFFECTS(LseScoreKernelOp)
PISA_KERNEL_EFFECTS(SparseAttentionGradQueriesKernelOp)
PISA_KERNEL_EFFECTS(SparseAttentionGradKeysKernelOp)
PISA_KERNEL_EFFECTS(SparseAttentionGradDeltaKernelOp)
PISA_KERNEL_EFFECTS(SparseAttentionGradQueriesFromScoresKernelOp)
#undef PISA_KERNEL_EFFECTS

/// Where the keys are a page pool: its page size S and Mp * S.
static LogicalResult verifyPagedKeys(Operation *op, Value keys,
                                     Value blockTable, int64_t numHeads) {
  if (!blockTable)
    return success();
  ArrayRef<int64_t> k = shapeOf(keys);
  return checkSameDim(op, "Hkv", "the page pool (dim 2)", k[2], "the heads",
                      numHeads);
}

LogicalResult SelectDecodeKernelOp::verify() {
  if (failed(verifyKernelOp(*this, false,
                            getBlockTable() ? getKeys() : Value())) ||
      failed(verifyPagedKeys(*this, getKeys(), getBlockTable(),
                             shapeOf(getPyramid())[1])) ||
      failed(checkTiledDims(
          *this, {{"queries", getQueries(), Tiled::Tokens},
                  {"keys", getKeys(),
                   getBlockTable() ? Tiled::PagePool : Tiled::Tokens},
                  {"pyramid", getPyramid(), Tiled::Rows},
                  {"selection", getSelection(), Tiled::Tokens}})) ||
      failed(checkGroups(*this, shapeOf(getQueries())[1],
                         shapeOf(getPyramid())[1])))
    return failure();
  ArrayRef<int64_t> q = shapeOf(getQueries()), k = shapeOf(getKeys());
  ArrayRef<int64_t> r = shapeOf(getSelection());
  return failure(
      failed(checkSameDim(*this, "d", "keys", k[3], "queries", q[3])) ||
      failed(checkSameDim(*this, "B", "seq_lens", shapeOf(getSeqLens())[0],
                          "queries", q[0])) ||
      failed(checkSameDim(*this, "Nq", "selection", r[2], "queries", q[2])) ||
      failed(checkSameDim(*this, "K", "selection", r[3], "topk", getTopk())));
}

LogicalResult mlir::pisa::detail::checkPackedBatch(Operation *op,
                                                   Value cuQueries,
                                                   Value cuKeys,
                                                   bool tokenMajor,
                                                   int64_t batch) {
  if (bool(cuQueries) != bool(cuKeys))
    return op->emitOpError("expected both cu_seqlens_q and cu_seqlens_k or "
                           "neither");
  if (!cuQueries)
    return success();
  if (!tokenMajor)
    return op->emitOpError("expected token_major with cu_seqlens (a packed "
                           "batch is token-major)");
  for (auto [name, cu] :
       {std::pair<StringRef, Value>{"cu_seqlens_q", cuQueries},
        {"cu_seqlens_k", cuKeys}})
    if (shapeOf(cu)[0] == 0)
      return op->emitOpError()
             << "expected " << name << " to have B + 1 >= 1 entries but got 0";
  return failure(
      failed(checkSameDim(op, "B", "queries", batch, "a packed batch", 1)) ||
      failed(checkSameDim(op, "B + 1", "cu_seqlens_q", shapeOf(cuQueries)[0],
                          "cu_seqlens_k", shapeOf(cuKeys)[0])));
}

LogicalResult SparseAttentionKernelOp::verify() {
  const bool tm = getTokenMajor();
  if (failed(verifyKernelOp(*this)) ||
      failed(checkTiledDims(*this,
                            {{"queries", getQueries(), Tiled::Tokens, tm},
                             {"keys", getKeys(), Tiled::Tokens, tm},
                             {"values", getValues(), Tiled::Tokens, tm},
                             {"selection", getSelection(), Tiled::Tokens, tm},
                             {"output", getOutput(), Tiled::Tokens, tm}})))
    return failure();
  // The kernels read and write one element type (the lowering stores
  // `output` in the queries' type).
  Type elem = mlir::getElementTypeOrSelf(getQueries().getType());
  for (auto [name, value] : {std::pair<StringRef, Value>{"keys", getKeys()},
                             {"values", getValues()},
                             {"output", getOutput()}})
    if (mlir::getElementTypeOrSelf(value.getType()) != elem)
      return emitOpError() << "expected " << name << " of the queries' "
                           << "element type " << elem << " but got "
                           << mlir::getElementTypeOrSelf(value.getType());
  SmallVector<int64_t, 4> q = tokenShapeOf(getQueries(), tm);
  SmallVector<int64_t, 4> k = tokenShapeOf(getKeys(), tm);
  if (failed(checkGroups(*this, q[1], k[1])))
    return failure();
  if (failed(
          checkPackedBatch(*this, getCuSeqlensQ(), getCuSeqlensK(), tm, q[0])))
    return failure();
  SmallVector<int64_t, 4> v = tokenShapeOf(getValues(), tm);
  SmallVector<int64_t, 4> o = tokenShapeOf(getOutput(), tm);
  SmallVector<int64_t, 4> sel = tokenShapeOf(getSelection(), tm);
  ArrayRef<int64_t> l = shapeOf(getLse());
  SmallVector<int64_t, 3> lse{l[0], l[tm ? 2 : 1], l[tm ? 1 : 2]};
  return failure(
      failed(checkSameDim(*this, "d", "keys", k[3], "queries", q[3])) ||
      failed(checkSameDim(*this, "N", "values", v[2], "keys", k[2])) ||
      failed(checkSameDim(*this, "Hkv", "values", v[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "Hkv", "selection", sel[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "Nq", "selection", sel[2], "queries", q[2])) ||
      failed(checkSameDim(*this, "Hq", "output", o[1], "queries", q[1])) ||
      failed(checkSameDim(*this, "Nq", "output", o[2], "queries", q[2])) ||
      failed(checkSameDim(*this, "dv", "output", o[3], "values", v[3])) ||
      failed(checkSameDim(*this, "B", "lse", lse[0], "queries", q[0])) ||
      failed(checkSameDim(*this, "Hq", "lse", lse[1], "queries", q[1])) ||
      failed(checkSameDim(*this, "Nq", "lse", lse[2], "queries", q[2])));
}

// The append reads the cache it updates.
void PyramidAppendKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
  if (isa<MemRefType>(getPyramid().getType()))
    effects.emplace_back(MemoryEffects::Read::get(), &getPyramidMutable(),
                         SideEffects::DefaultResource::get());
}

LogicalResult PyramidAppendKernelOp::verify() {
  Value table = getBlockTable();
  if (failed(verifyKernelOp(*this, false, table ? getKeys() : Value())) ||
      failed(
          verifyPagedKeys(*this, getKeys(), table, shapeOf(getPyramid())[1])) ||
      failed(checkTiledDims(
          *this, {{"keys", getKeys(), table ? Tiled::PagePool : Tiled::Tokens},
                  {"pyramid", getPyramid(), Tiled::Rows}})))
    return failure();
  // B: the keys' dim 0, or the block table's for a page pool.
  Value batched = table ? table : getKeys();
  StringRef name = table ? "block_table" : "keys";
  return failure(
      failed(checkSameDim(*this, "d", "pyramid", shapeOf(getPyramid())[3],
                          "keys", shapeOf(getKeys())[3])) ||
      failed(checkSameDim(*this, "B", "from", shapeOf(getFrom())[0], name,
                          shapeOf(batched)[0])) ||
      failed(checkSameDim(*this, "B", "to", shapeOf(getTo())[0], name,
                          shapeOf(batched)[0])));
}

LogicalResult PyramidKernelOp::verify() {
  if (failed(verifyKernelOp(*this)) ||
      failed(checkTiledDims(
          *this, {{"keys", getKeys(), Tiled::Tokens, getTokenMajor()},
                  {"pyramid", getPyramid(), Tiled::Rows}})))
    return failure();
  return checkSameDim(*this, "d", "pyramid", shapeOf(getPyramid())[3], "keys",
                      shapeOf(getKeys())[3]);
}

LogicalResult FragmentPlanesKernelOp::verify() {
  if (failed(verifyKernelOp(*this)) ||
      failed(checkTiledDims(*this, {{"pyramid", getPyramid(), Tiled::Rows},
                                    {"planes", getPlanes(), Tiled::Rows}})))
    return failure();
  SmallVector<int64_t, 4> p = tokenShapeOf(getPyramid(), getTokenMajor());
  ArrayRef<int64_t> planes = shapeOf(getPlanes());
  if (failed(checkSameDim(*this, "rows", "planes", planes[2], "pyramid", p[2])))
    return failure();
  return twiceDim(*this, "values per row", "planes", planes[3],
                  "the pyramid's d", p[3]);
}

LogicalResult WalkKernelOp::verify() {
  const bool tm = getTokenMajor();
  if (failed(verifyKernelOp(*this)) ||
      failed(checkTiledDims(*this,
                            {{"queries", getQueries(), Tiled::Tokens, tm},
                             {"pyramid", getPyramid(), Tiled::Rows},
                             {"contenders", getContenders(), Tiled::PerKvHead},
                             {"counts", getCounts(), Tiled::PerKvHead}})) ||
      failed(checkGroups(*this, tokenShapeOf(getQueries(), tm)[1],
                         shapeOf(getContenders())[1])))
    return failure();
  SmallVector<int64_t, 4> q = tokenShapeOf(getQueries(), getTokenMajor());
  ArrayRef<int64_t> c = shapeOf(getContenders());
  ArrayRef<int64_t> n = shapeOf(getCounts()), p = shapeOf(getPyramid());
  int64_t candidates = getBranching() * getTopk();
  bool planes =
      cast<ShapedType>(getPyramid().getType()).getElementType().isBF16();
  if (planes != getTensorCores())
    return emitOpError(getTensorCores()
                           ? "expected bf16 fragment planes with tensor_cores"
                           : "expected an f32 pyramid without tensor_cores");
  // The tensor-core walk is built for one tiling (TensorCoreWalk.h).
  if (getTensorCores()) {
    int64_t hq = q[1], hkv = shapeOf(getContenders())[1];
    if (auto limit = tensorCoreWalkLimit(
            cast<ShapedType>(getQueries().getType()).getElementType().isBF16(),
            hq / hkv, q[3], getBranching(), candidates))
      return emitOpError() << "expected " << *limit << " with tensor_cores";
  }
  return failure(
      failed(checkSameDim(*this, "g * K", "contenders", c[3], "the attributes",
                          candidates)) ||
      failed(checkSameDim(*this, "Nq", "contenders", c[2], "queries", q[2])) ||
      failed(checkSameDim(*this, "Nq", "counts", n[2], "queries", q[2])) ||
      failed(getTensorCores() ? twiceDim(*this, "row width", "planes", p[3],
                                         "queries' d", q[3])
                              : checkSameDim(*this, "row width", "pyramid",
                                             p[3], "queries' d", q[3])));
}

LogicalResult BucketKernelOp::verify() {
  if (failed(verifyKernelOp(*this)) ||
      failed(checkTiledDims(*this,
                            {{"contenders", getContenders(), Tiled::PerKvHead},
                             {"counts", getCounts(), Tiled::PerKvHead}})))
    return failure();
  return checkSameDim(*this, "Nq", "counts", shapeOf(getCounts())[2],
                      "contenders", shapeOf(getContenders())[2]);
}

LogicalResult ScoreTilesKernelOp::verify() {
  const bool tm = getTokenMajor();
  if (failed(verifyKernelOp(*this)) ||
      failed(
          checkTiledDims(*this, {{"queries", getQueries(), Tiled::Tokens, tm},
                                 {"keys", getKeys(), Tiled::Tokens, tm},
                                 {"scores", getScores(), Tiled::PerKvHead}})))
    return failure();
  SmallVector<int64_t, 4> q = tokenShapeOf(getQueries(), getTokenMajor());
  SmallVector<int64_t, 4> k = tokenShapeOf(getKeys(), getTokenMajor());
  if (failed(checkGroups(*this, q[1], k[1])))
    return failure();
  ArrayRef<int64_t> s = shapeOf(getScores());
  return failure(
      failed(checkSameDim(*this, "d", "keys", k[3], "queries", q[3])) ||
      failed(checkSameDim(*this, "Nq", "scores", s[2], "queries", q[2])));
}

LogicalResult SelectFinalKernelOp::verify() {
  if (failed(verifyKernelOp(*this)) ||
      failed(checkTiledDims(
          *this,
          {{"contenders", getContenders(), Tiled::PerKvHead},
           {"counts", getCounts(), Tiled::PerKvHead},
           {"scores", getScores(), Tiled::PerKvHead},
           {"selection", getSelection(), Tiled::Tokens, getTokenMajor()}})))
    return failure();
  ArrayRef<int64_t> c = shapeOf(getContenders()), s = shapeOf(getScores());
  SmallVector<int64_t, 4> sel = tokenShapeOf(getSelection(), getTokenMajor());
  return failure(failed(checkSameDim(*this, "K", "selection", sel[3],
                                     "the attributes", getTopk())) ||
                 failed(checkSameDim(*this, "g * K", "scores", s[3],
                                     "contenders", c[3])) ||
                 failed(checkSameDim(*this, "Nq", "selection", sel[2],
                                     "contenders", c[2])));
}

LogicalResult SelectSingleStageKernelOp::verify() {
  const bool tm = getTokenMajor();
  if (failed(verifyKernelOp(*this)) ||
      failed(checkTiledDims(
          *this, {{"queries", getQueries(), Tiled::Tokens, tm},
                  {"keys", getKeys(), Tiled::Tokens, tm},
                  {"pyramid", getPyramid(), Tiled::Rows},
                  {"selection", getSelection(), Tiled::Tokens, tm}})))
    return failure();
  SmallVector<int64_t, 4> q = tokenShapeOf(getQueries(), getTokenMajor());
  SmallVector<int64_t, 4> k = tokenShapeOf(getKeys(), getTokenMajor());
  if (failed(checkGroups(*this, q[1], k[1])))
    return failure();
  SmallVector<int64_t, 4> sel = tokenShapeOf(getSelection(), getTokenMajor());
  return failure(
      failed(checkSameDim(*this, "K", "selection", sel[3], "the attributes",
                          getTopk())) ||
      failed(checkSameDim(*this, "d", "keys", k[3], "queries", q[3])) ||
      failed(checkSameDim(*this, "Nq", "selection", sel[2], "queries", q[2])));
}

LogicalResult PyramidVarlenKernelOp::verify() {
  if (failed(verifyKernelOp(*this, /*packed=*/true)) ||
      failed(checkTiledDims(*this, {{"keys", getKeys(), Tiled::Tokens},
                                    {"pyramid", getPyramid(), Tiled::Rows}})))
    return failure();
  ArrayRef<int64_t> k = shapeOf(getKeys()), p = shapeOf(getPyramid());
  return failure(
      failed(checkSameDim(*this, "Hkv", "pyramid", p[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "d", "pyramid", p[2], "keys", k[2])));
}

LogicalResult SelectSingleStageVarlenKernelOp::verify() {
  if (failed(verifyKernelOp(*this, /*packed=*/true)) ||
      failed(checkTiledDims(*this,
                            {{"queries", getQueries(), Tiled::Tokens},
                             {"keys", getKeys(), Tiled::Tokens},
                             {"pyramid", getPyramid(), Tiled::Rows},
                             {"selection", getSelection(), Tiled::Tokens}})))
    return failure();
  ArrayRef<int64_t> q = shapeOf(getQueries()), k = shapeOf(getKeys());
  if (failed(checkGroups(*this, q[1], k[1])))
    return failure();
  ArrayRef<int64_t> p = shapeOf(getPyramid()), sel = shapeOf(getSelection());
  return failure(
      failed(checkSameDim(*this, "K", "selection", sel[2], "the attributes",
                          getTopk())) ||
      failed(checkSameDim(*this, "d", "keys", k[2], "queries", q[2])) ||
      failed(checkSameDim(*this, "d", "pyramid", p[2], "keys", k[2])) ||
      failed(checkSameDim(*this, "Hkv", "pyramid", p[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "Hkv", "selection", sel[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "Tq", "selection", sel[0], "queries", q[0])) ||
      failed(checkSameDim(*this, "B + 1", "cu_seqlens_q",
                          shapeOf(getCuSeqlensQ())[0], "cu_seqlens_k",
                          shapeOf(getCuSeqlensK())[0])));
}

LogicalResult LseScoreKernelOp::verify() {
  ArrayRef<int64_t> q = shapeOf(getQueries()), c = shapeOf(getChildren());
  ArrayRef<int64_t> cand = shapeOf(getCandidates());
  ArrayRef<int64_t> u = shapeOf(getScores());
  auto elementOf = [](Value v) {
    return cast<ShapedType>(v.getType()).getElementType();
  };
  if (failed(verifyKernelOp(*this)) ||
      failed(checkScoredLevel(*this, getLevel(), getBlockSize(), getBranching(),
                              elementOf(getQueries()),
                              elementOf(getChildren()))) ||
      failed(checkTiledDims(*this,
                            {{"queries", getQueries(), Tiled::Tokens},
                             {"children", getChildren(), Tiled::Tokens}})) ||
      failed(checkGroups(*this, q[1], c[1])))
    return failure();
  return failure(
      failed(checkSameDim(*this, "d", "children", c[3], "queries", q[3])) ||
      failed(checkSameDim(*this, "Hkv", "candidates", cand[1], "children",
                          c[1])) ||
      failed(
          checkSameDim(*this, "Nq", "candidates", cand[2], "queries", q[2])) ||
      failed(checkSameDim(*this, "Hkv", "scores", u[1], "children", c[1])) ||
      failed(checkSameDim(*this, "Nq", "scores", u[2], "queries", q[2])) ||
      failed(checkSameDim(*this, "S", "scores", u[3], "candidates", cand[3])));
}

/// The selection's effects, and the append's write of the cache.
void AppendSelectSingleStageKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
  effects.emplace_back(MemoryEffects::Write::get(), &getPyramidMutable(),
                       SideEffects::DefaultResource::get());
}

LogicalResult AppendSelectSingleStageKernelOp::verify() {
  if (failed(verifyKernelOp(*this)))
    return failure();
  if (!hasPureBufferSemantics())
    return emitOpError("expected the buffer form: --pisa-fuse-decode-append "
                       "makes this op after bufferization");
  if (failed(checkTiledDims(*this,
                            {{"queries", getQueries(), Tiled::Tokens},
                             {"keys", getKeys(), Tiled::Tokens},
                             {"pyramid", getPyramid(), Tiled::Rows},
                             {"append_keys", getAppendKeys(), Tiled::Tokens},
                             {"selection", getSelection(), Tiled::Tokens}})))
    return failure();
  ArrayRef<int64_t> q = shapeOf(getQueries()), k = shapeOf(getKeys());
  ArrayRef<int64_t> a = shapeOf(getAppendKeys()), p = shapeOf(getPyramid());
  ArrayRef<int64_t> sel = shapeOf(getSelection());
  if (failed(checkGroups(*this, q[1], k[1])) ||
      failed(checkSameDim(*this, "K", "selection", sel[3], "the attributes",
                          getTopk())) ||
      failed(checkSameDim(*this, "d", "keys", k[3], "queries", q[3])) ||
      failed(checkSameDim(*this, "d", "append_keys", a[3], "queries", q[3])) ||
      failed(checkSameDim(*this, "Hkv", "append_keys", a[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "Hkv", "pyramid", p[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "Ncap", "append_keys", a[2], "capacity",
                          int64_t(getCapacity()))) ||
      failed(
          checkSameDim(*this, "Nq", "queries", q[2], "a decode step's", 1)) ||
      failed(checkSameDim(*this, "Nq", "selection", sel[2], "queries", q[2])))
    return failure();
  // The block's threads split the append's rows of d features.
  if (q[3] < 1 || kDecodeBlockThreads % q[3] != 0)
    return emitOpError() << "expected d (" << q[3]
                         << ") to divide the decode block's "
                         << kDecodeBlockThreads << " threads";
  return success();
}
