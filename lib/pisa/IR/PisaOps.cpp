//===- PisaOps.cpp - PISA op verifiers and helpers ------------------------===//
//
// Verifiers check every relation between operands, attributes and results
// that is known statically; dynamic extents are left to run time.
//
//===----------------------------------------------------------------------===//

#include "pisa/IR/PisaOps.h"
#include "ContractChecks.h"
#include "pisa/Analysis/PyramidLayout.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::pisa;
using mlir::pisa::detail::checkGroups;
using mlir::pisa::detail::checkPyramidParams;
using mlir::pisa::detail::checkSameDim;
using mlir::pisa::detail::checkScale;
using mlir::pisa::detail::checkScoredLevel;
using mlir::pisa::detail::checkTopK;

#define GET_OP_CLASSES
#include "pisa/IR/PisaOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shared checks
//===----------------------------------------------------------------------===//

static bool isStatic(int64_t dim) { return !ShapedType::isDynamic(dim); }

/// Heads, d and K fix the kernels' tiling: they stay static while B, N, Nq
/// and the pyramid's rows may be dynamic (docs/semantics.md).
static LogicalResult checkStaticDims(Operation *op, StringRef operand,
                                     ShapedType type,
                                     ArrayRef<std::pair<int, StringRef>> dims) {
  for (auto [dim, name] : dims)
    if (type.isDynamicDim(dim))
      return op->emitOpError()
             << "expected a static " << name << " (dim " << dim << ") in "
             << operand << " but got " << type;
  return success();
}

/// A constant query offset must be >= 0 and keep every query inside the
/// keys: offset + Nq <= N.
static LogicalResult checkQueryOffset(Operation *op, Value offset,
                                      int64_t numQueries, int64_t numKeys) {
  APInt value;
  if (!matchPattern(offset, m_ConstantInt(&value)))
    return success();
  int64_t off = value.getSExtValue();
  if (off < 0)
    return op->emitOpError() << "expected query_offset >= 0 but got " << off;
  // off > N - Nq rather than off + Nq > N: off may be near 2^63.
  if (isStatic(numQueries) && isStatic(numKeys) && off > numKeys - numQueries)
    return op->emitOpError() << "expected query_offset (" << off << ") + Nq ("
                             << numQueries << ") <= N (" << numKeys << ")";
  return success();
}

/// The packed pyramid of N keys has a fixed number of rows.
static LogicalResult checkPyramidRows(Operation *op, StringRef name,
                                      int64_t rows, int64_t numKeys,
                                      int64_t blockSize, int64_t branching) {
  if (!isStatic(numKeys) || !isStatic(rows))
    return success();
  if (numKeys < 1)
    return op->emitOpError() << "expected N >= 1 keys but got " << numKeys;
  PyramidLayout layout(numKeys, blockSize, branching);
  if (rows != layout.totalNodes())
    return op->emitOpError()
           << "expected " << name << " to have " << layout.totalNodes()
           << " rows for N = " << numKeys << ", C = " << blockSize
           << ", g = " << branching << " but got " << rows;
  return success();
}

//===----------------------------------------------------------------------===//
// PyramidBuildOp
//===----------------------------------------------------------------------===//

/// [B, H, T, X] of a 4-D shape in either layout.
static SmallVector<int64_t, 4> headMajorShape(ArrayRef<int64_t> shape,
                                              bool tokenMajor) {
  return {shape[0], shape[headDimIndex(tokenMajor)],
          shape[tokenDimIndex(tokenMajor)], shape[3]};
}

LogicalResult PyramidBuildOp::verify() {
  if (failed(checkPyramidParams(*this, getBlockSize(), getBranching())))
    return failure();
  const bool tokenMajor = getTokenMajor();
  if (failed(
          checkStaticDims(*this, "keys", getKeys().getType(),
                          {{int(headDimIndex(tokenMajor)), "Hkv"}, {3, "d"}})))
    return failure();
  SmallVector<int64_t, 4> k =
      headMajorShape(getKeys().getType().getShape(), tokenMajor);
  ArrayRef<int64_t> p = getPyramid().getType().getShape();
  if (failed(checkSameDim(*this, "B", "pyramid", p[0], "keys", k[0])) ||
      failed(checkSameDim(*this, "Hkv", "pyramid", p[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "d", "pyramid", p[3], "keys", k[3])))
    return failure();
  return checkPyramidRows(*this, "pyramid", p[2], k[2], getBlockSize(),
                          getBranching());
}

//===----------------------------------------------------------------------===//
// PyramidAppendOp
//===----------------------------------------------------------------------===//

/// A key cache as [B, Hkv, Ncap, d]: the keys themselves, or a page pool
/// [P, S, Hkv, d] with its block table [B, Mp] (Ncap = Mp * S; S, Hkv, d
/// and Mp static).
static FailureOr<SmallVector<int64_t, 4>>
cacheShape(Operation *op, RankedTensorType keys, Value blockTable) {
  ArrayRef<int64_t> k = keys.getShape();
  if (!blockTable) {
    if (failed(checkStaticDims(op, "keys", keys, {{1, "Hkv"}, {3, "d"}})))
      return failure();
    return SmallVector<int64_t, 4>{k[0], k[1], k[2], k[3]};
  }
  auto table = cast<RankedTensorType>(blockTable.getType());
  if (failed(checkStaticDims(op, "keys", keys,
                             {{1, "page size S"}, {2, "Hkv"}, {3, "d"}})) ||
      failed(checkStaticDims(op, "block_table", table,
                             {{1, "pages per sequence Mp"}})))
    return failure();
  const int64_t pageSize = k[1], pages = table.getDimSize(1);
  // pages > max / S rather than pages * S > max: no overflow for any sizes.
  if (pageSize < 1 || pages < 1 ||
      pages > std::numeric_limits<int32_t>::max() / pageSize)
    return op->emitOpError()
           << "expected a page size S >= 1 and Mp >= 1 pages per sequence "
              "with Mp * S < 2^31 (i32 positions) but got S = "
           << pageSize << ", Mp = " << pages;
  return SmallVector<int64_t, 4>{table.getDimSize(0), k[2], pages * pageSize,
                                 k[3]};
}

int64_t PyramidAppendOp::getCapacity() {
  if (Value table = getBlockTable())
    return cast<RankedTensorType>(table.getType()).getDimSize(1) *
           getKeys().getType().getDimSize(1);
  return getKeys().getType().getDimSize(2);
}

LogicalResult PyramidAppendOp::verify() {
  if (failed(checkPyramidParams(*this, getBlockSize(), getBranching())))
    return failure();
  FailureOr<SmallVector<int64_t, 4>> cache =
      cacheShape(*this, getKeys().getType(), getBlockTable());
  if (failed(cache))
    return failure();
  ArrayRef<int64_t> k = *cache;
  ArrayRef<int64_t> p = getPyramid().getType().getShape();
  if (getPyramid().getType() != getResult().getType())
    return emitOpError() << "expected the result to have the pyramid's type "
                         << getPyramid().getType() << " but got "
                         << getResult().getType();
  int64_t from = getFrom().getType().getDimSize(0);
  int64_t to = getTo().getType().getDimSize(0);
  // A paged cache's B is its block table's.
  StringRef batchOf = getBlockTable() ? "block_table" : "keys";
  if (failed(checkSameDim(*this, "B", "pyramid", p[0], batchOf, k[0])) ||
      failed(checkSameDim(*this, "Hkv", "pyramid", p[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "d", "pyramid", p[3], "keys", k[3])) ||
      failed(checkSameDim(*this, "B", "from", from, batchOf, k[0])) ||
      failed(checkSameDim(*this, "B", "to", to, batchOf, k[0])))
    return failure();
  // The cache is sized for the key cache's capacity.
  return checkPyramidRows(*this, "pyramid", p[2], k[2], getBlockSize(),
                          getBranching());
}

//===----------------------------------------------------------------------===//
// LseScoreOp
//===----------------------------------------------------------------------===//

LogicalResult LseScoreOp::verify() {
  if (failed(checkPyramidParams(*this, getBlockSize(), getBranching())) ||
      failed(checkScale(*this, getScaleAttr())))
    return failure();
  RankedTensorType qType = getQueries().getType();
  RankedTensorType childType = getChildren().getType();
  if (failed(checkScoredLevel(*this, getLevel(), getBlockSize(), getBranching(),
                              qType.getElementType(),
                              childType.getElementType())))
    return failure();

  if (failed(checkStaticDims(*this, "queries", qType, {{1, "Hq"}, {3, "d"}})) ||
      failed(checkStaticDims(*this, "children", childType, {{1, "Hkv"}})))
    return failure();
  ArrayRef<int64_t> q = qType.getShape();
  ArrayRef<int64_t> c = childType.getShape();
  ArrayRef<int64_t> cand = getCandidates().getType().getShape();
  ArrayRef<int64_t> s = getScores().getType().getShape();
  if (failed(checkSameDim(*this, "B", "children", c[0], "queries", q[0])) ||
      failed(checkSameDim(*this, "d", "children", c[3], "queries", q[3])) ||
      failed(checkGroups(*this, q[1], c[1])))
    return failure();
  const char *names[] = {"B", "Hkv", "Nq", "S"};
  int64_t expected[] = {q[0], c[1], q[2], cand[3]};
  for (int i = 0; i < 4; ++i) {
    if (failed(checkSameDim(*this, names[i], "candidates", cand[i],
                            "the expected shape", expected[i])) ||
        failed(checkSameDim(*this, names[i], "scores", s[i],
                            "the expected shape", expected[i])))
      return failure();
  }
  APInt offset;
  if (matchPattern(getQueryOffset(), m_ConstantInt(&offset)) &&
      offset.isNegative())
    return emitOpError() << "expected query_offset >= 0 but got "
                         << offset.getSExtValue();
  return success();
}

//===----------------------------------------------------------------------===//
// HierTopKOp
//===----------------------------------------------------------------------===//

/// The logit scale of an op with queries [B, Hq, Nq, d]: the attribute,
/// else 1/sqrt(d).
/// The attribute, else 1/sqrt(d) (the queries' last dimension, batched or
/// packed).
static float scaleOrDefault(FloatAttr scale, RankedTensorType queries) {
  if (scale)
    return static_cast<float>(scale.getValueAsDouble());
  return 1.0f / std::sqrt(static_cast<float>(
                    queries.getDimSize(queries.getRank() - 1)));
}

float LseScoreOp::getScaleOrDefault() {
  return scaleOrDefault(getScaleAttr(), getQueries().getType());
}

float HierTopKOp::getScaleOrDefault() {
  return scaleOrDefault(getScaleAttr(), getQueries().getType());
}

/// K in [3, kMaxTopK] and one element type for queries and keys: the
/// checks both forms of hier_topk share.
static LogicalResult checkTopKAndTypes(Operation *op, int64_t topK,
                                       Type queries, Type keys) {
  if (failed(checkTopK(op, topK)))
    return failure();
  Type q = cast<ShapedType>(queries).getElementType();
  Type k = cast<ShapedType>(keys).getElementType();
  if (q != k)
    return op->emitOpError() << "expected queries and keys to have the same "
                                "element type but got "
                             << q << " and " << k;
  return success();
}

LogicalResult HierTopKOp::verify() {
  if (failed(checkPyramidParams(*this, getBlockSize(), getBranching())) ||
      failed(checkScale(*this, getScaleAttr())))
    return failure();
  if (std::optional<uint64_t> capacity = getCapacity()) {
    int64_t n = getKeys().getType().getDimSize(tokenDimIndex(getTokenMajor()));
    if (int64_t(*capacity) < 1 || (isStatic(n) && int64_t(*capacity) < n))
      return emitOpError() << "expected capacity >= N (" << n
                           << ") and >= 1 but got " << *capacity;
  }
  RankedTensorType qType = getQueries().getType();
  RankedTensorType kType = getKeys().getType();
  if (failed(checkTopKAndTypes(*this, getTopk(), qType, kType)))
    return failure();

  const bool tokenMajor = getTokenMajor();
  const int heads = headDimIndex(tokenMajor);
  if (failed(checkStaticDims(*this, "queries", qType,
                             {{heads, "Hq"}, {3, "d"}})) ||
      failed(checkStaticDims(*this, "keys", kType, {{heads, "Hkv"}})) ||
      failed(checkStaticDims(*this, "selection", getSelection().getType(),
                             {{3, "K"}})))
    return failure();
  SmallVector<int64_t, 4> q = headMajorShape(qType.getShape(), tokenMajor);
  SmallVector<int64_t, 4> k = headMajorShape(kType.getShape(), tokenMajor);
  ArrayRef<int64_t> p = getPyramid().getType().getShape();
  SmallVector<int64_t, 4> r =
      headMajorShape(getSelection().getType().getShape(), tokenMajor);
  if (failed(checkSameDim(*this, "B", "keys", k[0], "queries", q[0])) ||
      failed(checkSameDim(*this, "d", "keys", k[3], "queries", q[3])) ||
      failed(checkGroups(*this, q[1], k[1])) ||
      failed(checkSameDim(*this, "B", "pyramid", p[0], "keys", k[0])) ||
      failed(checkSameDim(*this, "Hkv", "pyramid", p[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "d", "pyramid", p[3], "keys", k[3])) ||
      failed(checkPyramidRows(*this, "pyramid", p[2],
                              getCapacity() ? int64_t(*getCapacity()) : k[2],
                              getBlockSize(), getBranching())) ||
      failed(checkSameDim(*this, "B", "selection", r[0], "queries", q[0])) ||
      failed(checkSameDim(*this, "Hkv", "selection", r[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "Nq", "selection", r[2], "queries", q[2])) ||
      failed(checkSameDim(*this, "K", "selection", r[3], "topk", getTopk())))
    return failure();
  return checkQueryOffset(*this, getQueryOffset(), q[2], k[2]);
}

//===----------------------------------------------------------------------===//
// DecodeSelectOp
//===----------------------------------------------------------------------===//

float DecodeSelectOp::getScaleOrDefault() {
  return scaleOrDefault(getScaleAttr(), getQueries().getType());
}

int64_t DecodeSelectOp::getCapacity() {
  if (Value table = getBlockTable())
    return cast<RankedTensorType>(table.getType()).getDimSize(1) *
           getKeys().getType().getDimSize(1);
  return getKeys().getType().getDimSize(2);
}

int64_t DecodeSelectOp::getKvHeads() {
  return getKeys().getType().getDimSize(getBlockTable() ? 2 : 1);
}

LogicalResult DecodeSelectOp::verify() {
  if (failed(checkPyramidParams(*this, getBlockSize(), getBranching())) ||
      failed(checkScale(*this, getScaleAttr())))
    return failure();
  RankedTensorType qType = getQueries().getType();
  RankedTensorType kType = getKeys().getType();
  if (failed(checkTopKAndTypes(*this, getTopk(), qType, kType)))
    return failure();
  if (!getBlockTable() &&
      failed(checkStaticDims(*this, "keys", kType, {{2, "capacity Ncap"}})))
    return failure();
  FailureOr<SmallVector<int64_t, 4>> cache =
      cacheShape(*this, kType, getBlockTable());
  if (failed(cache) ||
      failed(checkStaticDims(*this, "queries", qType, {{1, "Hq"}, {3, "d"}})) ||
      failed(checkStaticDims(*this, "selection", getSelection().getType(),
                             {{3, "K"}})))
    return failure();
  ArrayRef<int64_t> q = qType.getShape(), k = *cache;
  ArrayRef<int64_t> p = getPyramid().getType().getShape();
  ArrayRef<int64_t> r = getSelection().getType().getShape();
  if (k[2] < 1)
    return emitOpError() << "expected a capacity Ncap >= 1 but got " << k[2];
  // A paged cache's B is its block table's.
  StringRef batchOf = getBlockTable() ? "block_table" : "keys";
  return failure(
      failed(checkSameDim(*this, "B", batchOf, k[0], "queries", q[0])) ||
      failed(checkSameDim(*this, "d", "keys", k[3], "queries", q[3])) ||
      failed(checkGroups(*this, q[1], k[1])) ||
      failed(checkSameDim(*this, "B", "seq_lens",
                          getSeqLens().getType().getDimSize(0), "queries",
                          q[0])) ||
      failed(checkSameDim(*this, "B", "pyramid", p[0], "keys", k[0])) ||
      failed(checkSameDim(*this, "Hkv", "pyramid", p[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "d", "pyramid", p[3], "keys", k[3])) ||
      failed(checkPyramidRows(*this, "pyramid", p[2], k[2], getBlockSize(),
                              getBranching())) ||
      failed(checkSameDim(*this, "B", "selection", r[0], "queries", q[0])) ||
      failed(checkSameDim(*this, "Hkv", "selection", r[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "Nq", "selection", r[2], "queries", q[2])) ||
      failed(checkSameDim(*this, "K", "selection", r[3], "topk", getTopk())));
}

//===----------------------------------------------------------------------===//
// SparseAttentionOp
//===----------------------------------------------------------------------===//

float SparseAttentionOp::getScaleOrDefault() {
  return scaleOrDefault(getScaleAttr(), getQueries().getType());
}

float SparseAttentionVarlenOp::getScaleOrDefault() {
  return scaleOrDefault(getScaleAttr(), getQueries().getType());
}

float SparseAttentionGradVarlenOp::getScaleOrDefault() {
  return scaleOrDefault(getScaleAttr(), getQueries().getType());
}

/// C in [1, 2^20], scale valid, and queries, keys, values and output of one
/// element type: what every attention op checks first.
static LogicalResult checkAttentionBasics(Operation *op, int64_t blockSize,
                                          FloatAttr scale, Value queries,
                                          Value keys, Value values,
                                          Value output) {
  if (blockSize < 1 || blockSize > kMaxBlockSize)
    return op->emitOpError() << "expected block size C in [1, " << kMaxBlockSize
                             << "] but got " << blockSize;
  if (failed(checkScale(op, scale)))
    return failure();
  Type q = cast<RankedTensorType>(queries.getType()).getElementType();
  Type k = cast<RankedTensorType>(keys.getType()).getElementType();
  Type v = cast<RankedTensorType>(values.getType()).getElementType();
  Type o = cast<RankedTensorType>(output.getType()).getElementType();
  if (k != q || v != q || o != q)
    return op->emitOpError() << "expected queries, keys, values and output to "
                                "have one element type but got "
                             << q << ", " << k << ", " << v << " and " << o;
  return success();
}

/// The rules a sparse_attention and its gradient share (docs/semantics.md,
/// sections 6 and 6.1): C and scale in range; queries, keys, values and
/// output of one element type; static Hq, Hkv, d, dv and K; the shapes of
/// q, k, v, the selection, o and lse consistent in layout `tm`; the offset.
static LogicalResult verifyAttention(Operation *op, int64_t blockSize,
                                     FloatAttr scale, Value queries, Value keys,
                                     Value values, Value selection,
                                     Value offset, Value output, Value lseValue,
                                     bool tm) {
  if (failed(checkAttentionBasics(op, blockSize, scale, queries, keys, values,
                                  output)))
    return failure();
  auto qType = cast<RankedTensorType>(queries.getType());
  auto kType = cast<RankedTensorType>(keys.getType());
  auto vType = cast<RankedTensorType>(values.getType());
  auto selType = cast<RankedTensorType>(selection.getType());
  auto oType = cast<RankedTensorType>(output.getType());
  const int heads = headDimIndex(tm);
  if (failed(
          checkStaticDims(op, "queries", qType, {{heads, "Hq"}, {3, "d"}})) ||
      failed(checkStaticDims(op, "keys", kType, {{heads, "Hkv"}})) ||
      failed(checkStaticDims(op, "values", vType, {{3, "dv"}})) ||
      failed(checkStaticDims(op, "selection", selType, {{3, "K"}})))
    return failure();
  // [B, H, T, X] whatever the layout; lse [B, Hq, Nq].
  SmallVector<int64_t, 4> q = headMajorShape(qType.getShape(), tm);
  SmallVector<int64_t, 4> k = headMajorShape(kType.getShape(), tm);
  SmallVector<int64_t, 4> v = headMajorShape(vType.getShape(), tm);
  SmallVector<int64_t, 4> o = headMajorShape(oType.getShape(), tm);
  SmallVector<int64_t, 4> sel = headMajorShape(selType.getShape(), tm);
  ArrayRef<int64_t> l = cast<RankedTensorType>(lseValue.getType()).getShape();
  SmallVector<int64_t, 3> lse{l[0], l[tm ? 2 : 1], l[tm ? 1 : 2]};
  if (failed(checkSameDim(op, "B", "keys", k[0], "queries", q[0])) ||
      failed(checkSameDim(op, "d", "keys", k[3], "queries", q[3])) ||
      failed(checkGroups(op, q[1], k[1])) ||
      failed(checkSameDim(op, "B", "values", v[0], "keys", k[0])) ||
      failed(checkSameDim(op, "Hkv", "values", v[1], "keys", k[1])) ||
      failed(checkSameDim(op, "N", "values", v[2], "keys", k[2])) ||
      failed(checkSameDim(op, "B", "selection", sel[0], "queries", q[0])) ||
      failed(checkSameDim(op, "Hkv", "selection", sel[1], "keys", k[1])) ||
      failed(checkSameDim(op, "Nq", "selection", sel[2], "queries", q[2])) ||
      failed(checkSameDim(op, "B", "output", o[0], "queries", q[0])) ||
      failed(checkSameDim(op, "Hq", "output", o[1], "queries", q[1])) ||
      failed(checkSameDim(op, "Nq", "output", o[2], "queries", q[2])) ||
      failed(checkSameDim(op, "dv", "output", o[3], "values", v[3])) ||
      failed(checkSameDim(op, "B", "lse", lse[0], "queries", q[0])) ||
      failed(checkSameDim(op, "Hq", "lse", lse[1], "queries", q[1])) ||
      failed(checkSameDim(op, "Nq", "lse", lse[2], "queries", q[2])))
    return failure();
  return checkQueryOffset(op, offset, q[2], k[2]);
}

LogicalResult SparseAttentionOp::verify() {
  return verifyAttention(*this, getBlockSize(), getScaleAttr(), getQueries(),
                         getKeys(), getValues(), getSelection(),
                         getQueryOffset(), getOutput(), getLse(),
                         getTokenMajor());
}

float SparseAttentionGradOp::getScaleOrDefault() {
  return scaleOrDefault(getScaleAttr(), getQueries().getType());
}

/// `a` and `b` (of one rank) agree in every static dimension.
static LogicalResult checkSameShape(Operation *op, StringRef aName, Value a,
                                    StringRef bName, Value b) {
  static const char *const kDims[] = {"dimension 0", "dimension 1",
                                      "dimension 2", "dimension 3"};
  ArrayRef<int64_t> aShape = cast<RankedTensorType>(a.getType()).getShape();
  ArrayRef<int64_t> bShape = cast<RankedTensorType>(b.getType()).getShape();
  for (size_t i = 0; i < aShape.size(); ++i)
    if (failed(checkSameDim(op, kDims[i], aName, aShape[i], bName, bShape[i])))
      return failure();
  return success();
}

/// `grad` has the shape of `of` and its element type is f32 or `of`'s.
static LogicalResult checkGradient(Operation *op, StringRef gradName,
                                   Value grad, StringRef ofName, Value of) {
  Type gElem = cast<RankedTensorType>(grad.getType()).getElementType();
  Type oElem = cast<RankedTensorType>(of.getType()).getElementType();
  if (gElem != oElem && !gElem.isF32())
    return op->emitOpError()
           << "expected " << gradName << " of element type f32 or " << oElem
           << " (that of " << ofName << ") but got " << gElem;
  return checkSameShape(op, gradName, grad, ofName, of);
}

/// What a gradient op adds to its forward's rules: grad_output of the
/// output's element type and shape, each gradient of its operand's shape.
static LogicalResult checkGradients(Operation *op, Value output,
                                    Value gradOutput, Value queries, Value keys,
                                    Value values, Value dq, Value dk,
                                    Value dv) {
  Type oElem = cast<RankedTensorType>(output.getType()).getElementType();
  Type dElem = cast<RankedTensorType>(gradOutput.getType()).getElementType();
  if (dElem != oElem)
    return op->emitOpError() << "expected grad_output of the output's element "
                                "type "
                             << oElem << " but got " << dElem;
  if (failed(checkSameShape(op, "grad_output", gradOutput, "output", output)) ||
      failed(checkGradient(op, "grad_queries", dq, "queries", queries)) ||
      failed(checkGradient(op, "grad_keys", dk, "keys", keys)) ||
      failed(checkGradient(op, "grad_values", dv, "values", values)))
    return failure();
  return success();
}

LogicalResult SparseAttentionGradOp::verify() {
  if (failed(verifyAttention(*this, getBlockSize(), getScaleAttr(),
                             getQueries(), getKeys(), getValues(),
                             getSelection(), getQueryOffset(), getOutput(),
                             getLse(), getTokenMajor())))
    return failure();
  return checkGradients(*this, getOutput(), getGradOutput(), getQueries(),
                        getKeys(), getValues(), getGradQueries(), getGradKeys(),
                        getGradValues());
}

//===----------------------------------------------------------------------===//
// Varlen ops (docs/semantics.md, section 7)
//===----------------------------------------------------------------------===//

/// cu_seqlens of B + 1 entries: B = size - 1 when static.
static int64_t sequencesOf(RankedTensorType cuSeqlens) {
  int64_t n = cuSeqlens.getDimSize(0);
  return isStatic(n) ? n - 1 : ShapedType::kDynamic;
}

static LogicalResult checkCuSeqlens(Operation *op, StringRef name,
                                    RankedTensorType type) {
  if (isStatic(type.getDimSize(0)) && type.getDimSize(0) < 1)
    return op->emitOpError()
           << "expected " << name << " to have B + 1 >= 1 entries but got 0";
  return success();
}

/// R = 2 floor(Tk / C) + 32 B rows when Tk and B are static.
static LogicalResult checkVarlenRows(Operation *op, int64_t rows,
                                     int64_t numKeys, int64_t sequences,
                                     int64_t blockSize) {
  if (!isStatic(rows) || !isStatic(numKeys) || !isStatic(sequences))
    return success();
  int64_t want = varlenPyramidRows(numKeys, sequences, blockSize);
  if (rows != want)
    return op->emitOpError()
           << "expected the varlen pyramid to have 2 floor(Tk / C) + "
           << kVarlenRowsPerSequence << " B = " << want
           << " rows for Tk = " << numKeys << ", B = " << sequences
           << ", C = " << blockSize << " but got " << rows;
  return success();
}

LogicalResult PyramidBuildVarlenOp::verify() {
  if (failed(checkPyramidParams(*this, getBlockSize(), getBranching())) ||
      failed(checkCuSeqlens(*this, "cu_seqlens", getCuSeqlens().getType())) ||
      failed(checkStaticDims(*this, "keys", getKeys().getType(),
                             {{1, "Hkv"}, {2, "d"}})))
    return failure();
  ArrayRef<int64_t> k = getKeys().getType().getShape();
  ArrayRef<int64_t> p = getPyramid().getType().getShape();
  if (failed(checkSameDim(*this, "Hkv", "pyramid", p[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "d", "pyramid", p[2], "keys", k[2])))
    return failure();
  return checkVarlenRows(*this, p[0], k[0],
                         sequencesOf(getCuSeqlens().getType()), getBlockSize());
}

float HierTopKVarlenOp::getScaleOrDefault() {
  if (FloatAttr scale = getScaleAttr())
    return static_cast<float>(scale.getValueAsDouble());
  return 1.0f /
         std::sqrt(static_cast<float>(getQueries().getType().getDimSize(2)));
}

/// The rules a packed sparse_attention and its gradient share (sections 6
/// and 7): C and scale in range; cu_seqlens of B + 1 >= 1 entries each,
/// the same B; queries, keys, values and output of one element type;
/// static Hq, Hkv, d, dv and K; Tq of q, the selection, o and lse and Tk of
/// k and v consistent.
static LogicalResult verifyAttentionVarlen(Operation *op, int64_t blockSize,
                                           FloatAttr scale, Value queries,
                                           Value keys, Value values,
                                           Value selection, Value cuQueries,
                                           Value cuKeys, Value output,
                                           Value lseValue) {
  if (failed(checkAttentionBasics(op, blockSize, scale, queries, keys, values,
                                  output)))
    return failure();
  auto cuQType = cast<RankedTensorType>(cuQueries.getType());
  auto cuKType = cast<RankedTensorType>(cuKeys.getType());
  if (failed(checkCuSeqlens(op, "cu_seqlens_q", cuQType)) ||
      failed(checkCuSeqlens(op, "cu_seqlens_k", cuKType)) ||
      failed(checkSameDim(op, "B + 1", "cu_seqlens_q", cuQType.getDimSize(0),
                          "cu_seqlens_k", cuKType.getDimSize(0))))
    return failure();
  auto qType = cast<RankedTensorType>(queries.getType());
  auto kType = cast<RankedTensorType>(keys.getType());
  auto vType = cast<RankedTensorType>(values.getType());
  auto oType = cast<RankedTensorType>(output.getType());
  auto selType = cast<RankedTensorType>(selection.getType());
  if (failed(checkStaticDims(op, "queries", qType, {{1, "Hq"}, {2, "d"}})) ||
      failed(checkStaticDims(op, "keys", kType, {{1, "Hkv"}})) ||
      failed(checkStaticDims(op, "values", vType, {{2, "dv"}})) ||
      failed(checkStaticDims(op, "selection", selType, {{2, "K"}})))
    return failure();
  ArrayRef<int64_t> q = qType.getShape(), k = kType.getShape();
  ArrayRef<int64_t> v = vType.getShape(), o = oType.getShape();
  ArrayRef<int64_t> sel = selType.getShape();
  ArrayRef<int64_t> lse = cast<RankedTensorType>(lseValue.getType()).getShape();
  if (failed(checkSameDim(op, "d", "keys", k[2], "queries", q[2])) ||
      failed(checkGroups(op, q[1], k[1])) ||
      failed(checkSameDim(op, "Tk", "values", v[0], "keys", k[0])) ||
      failed(checkSameDim(op, "Hkv", "values", v[1], "keys", k[1])) ||
      failed(checkSameDim(op, "Tq", "selection", sel[0], "queries", q[0])) ||
      failed(checkSameDim(op, "Hkv", "selection", sel[1], "keys", k[1])) ||
      failed(checkSameDim(op, "Tq", "output", o[0], "queries", q[0])) ||
      failed(checkSameDim(op, "Hq", "output", o[1], "queries", q[1])) ||
      failed(checkSameDim(op, "dv", "output", o[2], "values", v[2])) ||
      failed(checkSameDim(op, "Tq", "lse", lse[0], "queries", q[0])) ||
      failed(checkSameDim(op, "Hq", "lse", lse[1], "queries", q[1])))
    return failure();
  return success();
}

LogicalResult SparseAttentionVarlenOp::verify() {
  return verifyAttentionVarlen(*this, getBlockSize(), getScaleAttr(),
                               getQueries(), getKeys(), getValues(),
                               getSelection(), getCuSeqlensQ(), getCuSeqlensK(),
                               getOutput(), getLse());
}

LogicalResult SparseAttentionGradVarlenOp::verify() {
  if (failed(verifyAttentionVarlen(*this, getBlockSize(), getScaleAttr(),
                                   getQueries(), getKeys(), getValues(),
                                   getSelection(), getCuSeqlensQ(),
                                   getCuSeqlensK(), getOutput(), getLse())))
    return failure();
  return checkGradients(*this, getOutput(), getGradOutput(), getQueries(),
                        getKeys(), getValues(), getGradQueries(), getGradKeys(),
                        getGradValues());
}

LogicalResult HierTopKVarlenOp::verify() {
  if (failed(checkPyramidParams(*this, getBlockSize(), getBranching())) ||
      failed(checkScale(*this, getScaleAttr())) ||
      failed(
          checkCuSeqlens(*this, "cu_seqlens_q", getCuSeqlensQ().getType())) ||
      failed(checkCuSeqlens(*this, "cu_seqlens_k", getCuSeqlensK().getType())))
    return failure();
  RankedTensorType qType = getQueries().getType();
  RankedTensorType kType = getKeys().getType();
  if (failed(checkTopKAndTypes(*this, getTopk(), qType, kType)))
    return failure();
  if (failed(checkStaticDims(*this, "queries", qType, {{1, "Hq"}, {2, "d"}})) ||
      failed(checkStaticDims(*this, "keys", kType, {{1, "Hkv"}})) ||
      failed(checkStaticDims(*this, "selection", getSelection().getType(),
                             {{2, "K"}})))
    return failure();
  ArrayRef<int64_t> q = qType.getShape(), k = kType.getShape();
  ArrayRef<int64_t> p = getPyramid().getType().getShape();
  ArrayRef<int64_t> r = getSelection().getType().getShape();
  int64_t sequences = sequencesOf(getCuSeqlensK().getType());
  if (failed(checkSameDim(*this, "d", "keys", k[2], "queries", q[2])) ||
      failed(checkGroups(*this, q[1], k[1])) ||
      failed(checkSameDim(*this, "B + 1", "cu_seqlens_q",
                          getCuSeqlensQ().getType().getDimSize(0),
                          "cu_seqlens_k",
                          getCuSeqlensK().getType().getDimSize(0))) ||
      failed(checkSameDim(*this, "Hkv", "pyramid", p[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "d", "pyramid", p[2], "keys", k[2])) ||
      failed(checkVarlenRows(*this, p[0], k[0], sequences, getBlockSize())) ||
      failed(checkSameDim(*this, "Tq", "selection", r[0], "queries", q[0])) ||
      failed(checkSameDim(*this, "Hkv", "selection", r[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "K", "selection", r[2], "topk", getTopk())))
    return failure();
  return success();
}
