//===- PisaGradKernelOps.cpp - The backward's kernel-op verifiers ---------===//
//
// The verifiers of the backward's kernel-level ops (the dq pass, the key
// kernel, D and dq from the dS tiles): the sizes the kernels share with
// the forward's (q, k, v, selection, dO) and the backward's own operands,
// with the same helpers as PisaKernelOps.cpp (KernelOpChecks.h).
//
//===----------------------------------------------------------------------===//

#include "ContractChecks.h"
#include "KernelOpChecks.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

/// The backward kernels read q, k, v and dO (and o) of one element type and
/// write each gradient in f32 or that type.
static LogicalResult
checkGradElementTypes(Operation *op, Value queries,
                      ArrayRef<std::pair<StringRef, Value>> inputs,
                      ArrayRef<std::pair<StringRef, Value>> gradients) {
  Type elem = mlir::getElementTypeOrSelf(queries.getType());
  for (auto [name, value] : inputs)
    if (mlir::getElementTypeOrSelf(value.getType()) != elem)
      return op->emitOpError()
             << "expected " << name << " of the queries' element type " << elem
             << " but got " << mlir::getElementTypeOrSelf(value.getType());
  for (auto [name, value] : gradients) {
    Type t = mlir::getElementTypeOrSelf(value.getType());
    if (t != elem && !t.isF32())
      return op->emitOpError() << "expected " << name << " of element type f32 "
                               << "or " << elem << " but got " << t;
  }
  return success();
}

/// [B, Hq, Nq] of a per-query-head f32 operand: lse follows the layout,
/// delta is head-major always.
static SmallVector<int64_t, 3> rowShapeOf(Value v, bool tokenMajor) {
  ArrayRef<int64_t> l = shapeOf(v);
  return {l[0], l[tokenMajor ? 2 : 1], l[tokenMajor ? 1 : 2]};
}

/// The sizes both backward kernels share: q, k, v, selection and dO.
static LogicalResult checkGradOperands(Operation *op, Value queries, Value keys,
                                       Value values, Value selection,
                                       Value gradOutput, Value lse, Value delta,
                                       bool tm) {
  if (failed(
          checkTiledDims(op, {{"queries", queries, Tiled::Tokens, tm},
                              {"keys", keys, Tiled::Tokens, tm},
                              {"values", values, Tiled::Tokens, tm},
                              {"selection", selection, Tiled::Tokens, tm},
                              {"grad_output", gradOutput, Tiled::Tokens, tm}})))
    return failure();
  SmallVector<int64_t, 4> q = tokenShapeOf(queries, tm);
  SmallVector<int64_t, 4> k = tokenShapeOf(keys, tm);
  if (failed(checkGroups(op, q[1], k[1])))
    return failure();
  SmallVector<int64_t, 4> v = tokenShapeOf(values, tm);
  SmallVector<int64_t, 4> sel = tokenShapeOf(selection, tm);
  SmallVector<int64_t, 4> g = tokenShapeOf(gradOutput, tm);
  SmallVector<int64_t, 3> l = rowShapeOf(lse, tm),
                          dd = rowShapeOf(delta, false);
  return failure(
      failed(checkSameDim(op, "d", "keys", k[3], "queries", q[3])) ||
      failed(checkSameDim(op, "N", "values", v[2], "keys", k[2])) ||
      failed(checkSameDim(op, "Hkv", "values", v[1], "keys", k[1])) ||
      failed(checkSameDim(op, "Hkv", "selection", sel[1], "keys", k[1])) ||
      failed(checkSameDim(op, "Nq", "selection", sel[2], "queries", q[2])) ||
      failed(checkSameDim(op, "Hq", "grad_output", g[1], "queries", q[1])) ||
      failed(checkSameDim(op, "Nq", "grad_output", g[2], "queries", q[2])) ||
      failed(checkSameDim(op, "dv", "grad_output", g[3], "values", v[3])) ||
      failed(checkSameDim(op, "Hq", "lse", l[1], "queries", q[1])) ||
      failed(checkSameDim(op, "Nq", "lse", l[2], "queries", q[2])) ||
      failed(checkSameDim(op, "Hq", "delta", dd[1], "queries", q[1])) ||
      failed(checkSameDim(op, "Nq", "delta", dd[2], "queries", q[2])));
}

LogicalResult SparseAttentionGradQueriesKernelOp::verify() {
  const bool tm = getTokenMajor();
  if (failed(verifyKernelOp(*this)) ||
      failed(checkTiledDims(
          *this, {{"output", getOutput(), Tiled::Tokens, tm},
                  {"grad_queries", getGradQueries(), Tiled::Tokens, tm}})) ||
      failed(checkGradElementTypes(*this, getQueries(),
                                   {{"keys", getKeys()},
                                    {"values", getValues()},
                                    {"output", getOutput()},
                                    {"grad_output", getGradOutput()}},
                                   {{"grad_queries", getGradQueries()}})) ||
      failed(checkGradOperands(*this, getQueries(), getKeys(), getValues(),
                               getSelection(), getGradOutput(), getLse(),
                               getDelta(), tm)))
    return failure();
  SmallVector<int64_t, 4> q = tokenShapeOf(getQueries(), tm);
  SmallVector<int64_t, 4> o = tokenShapeOf(getOutput(), tm);
  SmallVector<int64_t, 4> g = tokenShapeOf(getGradOutput(), tm);
  SmallVector<int64_t, 4> dq = tokenShapeOf(getGradQueries(), tm);
  return failure(
      failed(checkPackedBatch(*this, getCuSeqlensQ(), getCuSeqlensK(), tm,
                              q[0])) ||
      failed(checkSameDim(*this, "Hq", "output", o[1], "queries", q[1])) ||
      failed(checkSameDim(*this, "Nq", "output", o[2], "queries", q[2])) ||
      failed(checkSameDim(*this, "dv", "output", o[3], "grad_output", g[3])) ||
      failed(
          checkSameDim(*this, "Hq", "grad_queries", dq[1], "queries", q[1])) ||
      failed(
          checkSameDim(*this, "Nq", "grad_queries", dq[2], "queries", q[2])) ||
      failed(checkSameDim(*this, "d", "grad_queries", dq[3], "queries", q[3])));
}

/// `scores` ([B, Hkv, Nq, K G C], the queries' element type): each query's
/// attended blocks' G x C dS tiles, in the order it attends them.
static LogicalResult checkScoresShape(Operation *op, Value scores,
                                      Value queries, Value keys,
                                      Value selection, int64_t blockSize,
                                      bool tm) {
  if (!scores)
    return success();
  if (mlir::getElementTypeOrSelf(scores.getType()) !=
      mlir::getElementTypeOrSelf(queries.getType()))
    return op->emitOpError() << "expected scores of the queries' element type "
                             << "but got " << scores.getType();
  if (failed(checkTiledDims(op, {{"scores", scores, Tiled::PerKvHead}})))
    return failure();
  SmallVector<int64_t, 4> q = tokenShapeOf(queries, tm);
  SmallVector<int64_t, 4> k = tokenShapeOf(keys, tm);
  ArrayRef<int64_t> ds = shapeOf(scores);
  const int64_t topK = tokenShapeOf(selection, tm)[3];
  const int64_t G = q[1] / k[1];
  return failure(
      failed(checkSameDim(op, "Hkv", "scores", ds[1], "keys", k[1])) ||
      failed(checkSameDim(op, "Nq", "scores", ds[2], "queries", q[2])) ||
      failed(checkSameDim(op, "K G C", "scores", ds[3], "the selection's tiles",
                          topK * G * blockSize)));
}

LogicalResult SparseAttentionGradKeysKernelOp::verify() {
  const bool tm = getTokenMajor();
  if (failed(verifyKernelOp(*this)) ||
      failed(checkTiledDims(
          *this, {{"grad_keys", getGradKeys(), Tiled::Tokens, tm},
                  {"grad_values", getGradValues(), Tiled::Tokens, tm}})) ||
      failed(checkGradElementTypes(
          *this, getQueries(),
          {{"keys", getKeys()},
           {"values", getValues()},
           {"grad_output", getGradOutput()}},
          {{"grad_keys", getGradKeys()}, {"grad_values", getGradValues()}})) ||
      failed(checkGradOperands(*this, getQueries(), getKeys(), getValues(),
                               getSelection(), getGradOutput(), getLse(),
                               getDelta(), tm)))
    return failure();
  SmallVector<int64_t, 4> k = tokenShapeOf(getKeys(), tm);
  SmallVector<int64_t, 4> v = tokenShapeOf(getValues(), tm);
  SmallVector<int64_t, 4> dk = tokenShapeOf(getGradKeys(), tm);
  SmallVector<int64_t, 4> dv = tokenShapeOf(getGradValues(), tm);
  if (failed(checkPackedBatch(*this, getCuSeqlensQ(), getCuSeqlensK(), tm,
                              tokenShapeOf(getQueries(), tm)[0])))
    return failure();
  // A packed batch's dq comes from the dq pass: its lists' rows are block
  // slots, not the tiles' rows.
  if (getScores() && getCuSeqlensQ())
    return emitOpError() << "stores dS tiles (scores) for a batched backward "
                         << "only, not with cu_seqlens";
  ArrayRef<int64_t> index = shapeOf(getQueryIndex());
  ArrayRef<int64_t> list = shapeOf(getQueryList());
  for (auto [name, value, shape] :
       {std::tuple<StringRef, Value, ArrayRef<int64_t>>{"query_index",
                                                        getQueryIndex(), index},
        {"query_list", getQueryList(), list}})
    if (ShapedType::isDynamic(shape[1]))
      return emitOpError() << "expected a static dim 1 (the kernels' tiling) "
                           << "in " << name << " but got " << value.getType();
  if (failed(checkTiledDims(
          *this, {{"accumulators", getAccumulators(), Tiled::PerKvHead}})))
    return failure();
  ArrayRef<int64_t> acc = shapeOf(getAccumulators());
  return failure(
      failed(
          checkSameDim(*this, "Hkv", "accumulators", acc[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "d + dv", "accumulators", acc[3],
                          "keys and values", k[3] + v[3])) ||
      failed(checkSameDim(*this, "Hkv", "grad_keys", dk[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "N", "grad_keys", dk[2], "keys", k[2])) ||
      failed(checkSameDim(*this, "d", "grad_keys", dk[3], "keys", k[3])) ||
      failed(
          checkSameDim(*this, "Hkv", "grad_values", dv[1], "values", v[1])) ||
      failed(checkSameDim(*this, "N", "grad_values", dv[2], "values", v[2])) ||
      failed(checkSameDim(*this, "dv", "grad_values", dv[3], "values", v[3])) ||
      failed(
          checkSameDim(*this, "Hkv", "query_index", index[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "Hkv", "query_list", list[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "K", "query_list", list[3], "selection",
                          shapeOf(getSelection())[3])) ||
      failed(checkScoresShape(*this, getScores(), getQueries(), getKeys(),
                              getSelection(), getBlockSize(), tm)));
}

LogicalResult SparseAttentionGradDeltaKernelOp::verify() {
  const bool tm = getTokenMajor();
  if (failed(verifyKernelOp(*this)) ||
      failed(checkTiledDims(
          *this, {{"output", getOutput(), Tiled::Tokens, tm},
                  {"grad_output", getGradOutput(), Tiled::Tokens, tm}})))
    return failure();
  if (mlir::getElementTypeOrSelf(getOutput().getType()) !=
      mlir::getElementTypeOrSelf(getGradOutput().getType()))
    return emitOpError() << "expected grad_output of the output's element "
                         << "type but got " << getGradOutput().getType();
  SmallVector<int64_t, 4> o = tokenShapeOf(getOutput(), tm);
  SmallVector<int64_t, 4> g = tokenShapeOf(getGradOutput(), tm);
  SmallVector<int64_t, 3> dd = rowShapeOf(getDelta(), false);
  return failure(
      failed(checkSameDim(*this, "Hq", "grad_output", g[1], "output", o[1])) ||
      failed(checkSameDim(*this, "Nq", "grad_output", g[2], "output", o[2])) ||
      failed(checkSameDim(*this, "dv", "grad_output", g[3], "output", o[3])) ||
      failed(checkSameDim(*this, "Hq", "delta", dd[1], "output", o[1])) ||
      failed(checkSameDim(*this, "Nq", "delta", dd[2], "output", o[2])));
}

LogicalResult SparseAttentionGradQueriesFromScoresKernelOp::verify() {
  const bool tm = getTokenMajor();
  if (failed(verifyKernelOp(*this)) ||
      failed(checkTiledDims(
          *this, {{"queries", getQueries(), Tiled::Tokens, tm},
                  {"keys", getKeys(), Tiled::Tokens, tm},
                  {"selection", getSelection(), Tiled::Tokens, tm},
                  {"grad_queries", getGradQueries(), Tiled::Tokens, tm}})) ||
      failed(checkGradElementTypes(*this, getQueries(), {{"keys", getKeys()}},
                                   {{"grad_queries", getGradQueries()}})))
    return failure();
  SmallVector<int64_t, 4> q = tokenShapeOf(getQueries(), tm);
  SmallVector<int64_t, 4> k = tokenShapeOf(getKeys(), tm);
  SmallVector<int64_t, 4> sel = tokenShapeOf(getSelection(), tm);
  SmallVector<int64_t, 4> dq = tokenShapeOf(getGradQueries(), tm);
  if (failed(checkGroups(*this, q[1], k[1])))
    return failure();
  return failure(
      failed(checkSameDim(*this, "d", "keys", k[3], "queries", q[3])) ||
      failed(checkSameDim(*this, "Hkv", "selection", sel[1], "keys", k[1])) ||
      failed(checkSameDim(*this, "Nq", "selection", sel[2], "queries", q[2])) ||
      failed(
          checkSameDim(*this, "Hq", "grad_queries", dq[1], "queries", q[1])) ||
      failed(
          checkSameDim(*this, "Nq", "grad_queries", dq[2], "queries", q[2])) ||
      failed(
          checkSameDim(*this, "d", "grad_queries", dq[3], "queries", q[3])) ||
      failed(checkScoresShape(*this, getScores(), getQueries(), getKeys(),
                              getSelection(), getBlockSize(), tm)));
}
