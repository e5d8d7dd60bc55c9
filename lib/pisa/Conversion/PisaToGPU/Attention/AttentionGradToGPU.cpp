//===- AttentionGradToGPU.cpp - The backward of sparse attention ----------===//
//
// pisa.kernel.sparse_attention_grad_queries: one block of four warps per
// (query, batch x KV head), like the forward's staged kernel. It stages the
// query's G head rows of q and dO, computes D = dO . o per row, and for
// each block the query attends (the forward's rule) stages its keys and
// values and computes
//
//   S = Q K^T, dP = dO V^T      warps split the block's keys
//   P = exp2(S scale log2 e - lse log2 e), dS = P (dP - D)   per row
//   dQ += dS K                  warps split d, f32 in shared memory
//
// pisa.kernel.sparse_attention_grad_keys: a kernel zeroes the query bits,
// one thread per (query, batch x KV head) sets bit i of every block query
// i attends, and one block per (key block, batch x KV head) stages the
// block's keys and values and walks the set bits in query order:
//
//   S = Q_i K^T, dP = dO_i V^T, P and dS as above, stored transposed
//   dV += P^T dO_i, dK += dS^T Q_i       warps split dv and d
//
// All products on tensor cores through --pisa-vector-to-mma-sync with f32
// accumulation; P and dS are rounded to the element type before the
// products that take them, as FlashAttention's backward does. Every sum
// runs in an order fixed by the data (the attended blocks of a query, the
// queries of a block in index order): the result is deterministic.
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionGrad.h"
#include "Attention/AttentionSteps.h"
#include "Attention/SparseAttention.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/RowSoftmax.h"
#include "Selection/QueryKernels.h"

#include "../Common/LoopBuilders.h"

#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

using P = arith::CmpIPredicate;

GradRows::GradRows(int64_t groupSize)
    : rows(groupSize <= 16   ? 16
           : groupSize <= 32 ? 32
                             : 64),
      threadsPerRow(kGradThreads / rows) {}

QueryGradPlan::QueryGradPlan(int64_t G, int64_t d, int64_t dv, int64_t c,
                             int64_t topK)
    : rows(G), headDim(d), valueDim(dv), blockSize(c), topK(topK) {
  const int64_t R = rows.rows;
  int64_t at = 0;
  query = SharedTiles::place(at, R * (d + 8) * 2);
  gradOut = SharedTiles::place(at, R * (dv + 8) * 2);
  key = SharedTiles::place(at, c * (d + 8) * 2);
  value = SharedTiles::place(at, c * (dv + 8) * 2);
  score = SharedTiles::place(at, R * (c + 4) * 4);
  gradProb = SharedTiles::place(at, R * (c + 4) * 4);
  gradScore = SharedTiles::place(at, R * (c + 8) * 2);
  gradQuery = SharedTiles::place(at, R * (d + 4) * 4);
  list = SharedTiles::place(at, topK * 4);
  bytes = at;
}

KeyGradPlan::KeyGradPlan(int64_t G, int64_t d, int64_t dv, int64_t c)
    : rows(G), headDim(d), valueDim(dv), blockSize(c) {
  const int64_t R = rows.rows;
  int64_t at = 0;
  key = SharedTiles::place(at, c * (d + 8) * 2);
  value = SharedTiles::place(at, c * (dv + 8) * 2);
  query = SharedTiles::place(at, R * (d + 8) * 2);
  gradOut = SharedTiles::place(at, R * (dv + 8) * 2);
  score = SharedTiles::place(at, R * (c + 4) * 4);
  gradProb = SharedTiles::place(at, R * (c + 4) * 4);
  probT = SharedTiles::place(at, c * (R + 8) * 2);
  gradScoreT = SharedTiles::place(at, c * (R + 8) * 2);
  gradKey = SharedTiles::place(at, c * (d + 4) * 4);
  gradValue = SharedTiles::place(at, c * (dv + 4) * 4);
  words = SharedTiles::place(at, kBitWindow * 4);
  bytes = at;
}

std::optional<std::string> mlir::pisa::detail::attentionGradLimitViolation(
    Type elem, int64_t G, int64_t d, int64_t dv, int64_t c, int64_t topK) {
  std::string why;
  llvm::raw_string_ostream os(why);
  if (!elem.isF16() && !elem.isBF16())
    os << "has " << elem
       << " inputs: the GPU backward takes f16 or bf16 (tensor cores), "
          "pisa-cpu-pipeline lowers f32";
  else if (c < 32 || c % 32 != 0 || c > kMaxAttentionBlockSize)
    os << "has block size C = " << c
       << ": the GPU backward takes a multiple of 32 up to "
       << kMaxAttentionBlockSize << " (four warps split a block's keys)";
  else if (d < 32 || d % 32 != 0 || d > kMaxAttentionHeadDim)
    os << "has head dim d = " << d
       << ": the GPU backward takes a multiple of 32 from 32 to "
       << kMaxAttentionHeadDim << " (four warps split dq's and dk's columns)";
  else if (dv < 32 || dv % 32 != 0 || dv > kMaxAttentionHeadDim)
    os << "has value dim dv = " << dv
       << ": the GPU backward takes a multiple of 32 from 32 to "
       << kMaxAttentionHeadDim << " (four warps split dv)";
  else if (topK > kMaxAttentionTopK)
    os << "selects K = " << topK << " blocks per query, above the GPU "
       << "limit of " << kMaxAttentionTopK << " (the block list in shared "
       << "memory)";
  else if (G > kMaxAttentionGroupSize)
    os << "has G = " << G << " query heads per KV head, above the GPU limit "
       << "of " << kMaxAttentionGroupSize << " (a block's score rows)";
  else if (int64_t bytes = std::max(QueryGradPlan(G, d, dv, c, topK).bytes,
                                    KeyGradPlan(G, d, dv, c).bytes);
           bytes > kMaxAttentionSharedBytes)
    os << "needs " << bytes << " bytes of shared memory per block for the "
       << "backward, above the " << kMaxAttentionSharedBytes
       << " an sm_90 block may use";
  else
    return std::nullopt;
  return why;
}

namespace {

/// A vector of `n` elements of `type` at [row, col] of `tile` (16-byte
/// aligned when the row fragment is).
Value loadRow(ImplicitLocOpBuilder &b, Value tile, ValueRange at, int64_t n,
              Type type) {
  const int64_t bytes = n * type.getIntOrFloatBitWidth() / 8;
  return vector::LoadOp::create(b, VectorType::get({n}, type), tile, at, false,
                                llvm::MaybeAlign(std::min<int64_t>(16, bytes)));
}

void storeRow(ImplicitLocOpBuilder &b, Value v, Value tile, ValueRange at) {
  auto type = cast<VectorType>(v.getType());
  const int64_t bytes =
      type.getNumElements() * type.getElementTypeBitWidth() / 8;
  vector::StoreOp::create(b, v, tile, at, false,
                          llvm::MaybeAlign(std::min<int64_t>(16, bytes)));
}

/// `v` (a vector of f32) in the element type of `memref`.
Value toElementsOf(ImplicitLocOpBuilder &b, Value v, Value memref) {
  Type elem = cast<MemRefType>(memref.getType()).getElementType();
  auto type = cast<VectorType>(v.getType());
  if (elem == type.getElementType())
    return v;
  return arith::TruncFOp::create(b, VectorType::get(type.getShape(), elem), v);
}

/// What one thread computes of a query's head rows: its row of the tile
/// (row = tid / threadsPerRow), its part of the row, and the row's head
/// (rows past G read head G - 1 and are masked).
struct RowSite {
  Value row, part, isHead, head;
  RowSite(ImplicitLocOpBuilder &b, const GradRows &rows, Value tid,
          Value firstHead, int64_t G) {
    row = arith::DivUIOp::create(b, tid, indexConst(b, rows.threadsPerRow));
    part = arith::RemUIOp::create(b, tid, indexConst(b, rows.threadsPerRow));
    isHead = cmp(b, P::ult, row, indexConst(b, G));
    head = arith::AddIOp::create(
        b, firstHead, arith::MinUIOp::create(b, row, indexConst(b, G - 1)));
  }
  Value firstColumn(ImplicitLocOpBuilder &b, int64_t columns) const {
    return arith::MulIOp::create(b, part, indexConst(b, columns));
  }
};

/// The exponent shift of a head row: lse log2 e, or +inf where the row
/// has no probability (a padding row, or lse = -inf: P = 0 by the
/// contract), so that exp2(logit - shift) is 0 there.
Value probabilityShift(ImplicitLocOpBuilder &b, Value lse, Value isHead) {
  const float inf = std::numeric_limits<float>::infinity();
  Value finite = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, lse,
                                       f32Const(b, -inf));
  Value use = arith::AndIOp::create(b, isHead, finite);
  return arith::SelectOp::create(
      b, use, arith::MulFOp::create(b, lse, f32Const(b, kLog2E)),
      f32Const(b, inf));
}

/// This thread's columns of a score row: P from the raw scores and dS = P
/// (dP - D), both f32 vectors of `columns`. `visible` is the number of the
/// tile's keys the row's query sees, counted from the thread's first
/// column.
std::pair<Value, Value> probabilityAndGradient(ImplicitLocOpBuilder &b,
                                               Value scores, Value gradProbs,
                                               Value visible, Value shift,
                                               Value delta, float scale,
                                               int64_t columns) {
  auto rowType = VectorType::get({columns}, b.getF32Type());
  visible = arith::MinSIOp::create(b, visible, indexConst(b, columns));
  Value logits =
      maskedRowLogits(b, scores, iotaI32(b, columns), visible, scale);
  Value probs =
      shiftedExp2(b, logits, vector::BroadcastOp::create(b, rowType, shift));
  Value grads = arith::MulFOp::create(
      b, probs,
      arith::SubFOp::create(b, gradProbs,
                            vector::BroadcastOp::create(b, rowType, delta)));
  return {probs, grads};
}

/// The query kernel's body.
class QueryGradBlock {
public:
  QueryGradBlock(ImplicitLocOpBuilder &b, const Kernel &e,
                 const QueryGradPlan &plan, int64_t G, int64_t kvHeads,
                 float scale)
      : e(e), p(plan), G(G), scale(scale) {
    elem = cast<MemRefType>(e.arg("queries").getType()).getElementType();
    SharedTiles shared(b);
    const int64_t R = p.rows.rows, c = p.blockSize;
    Type f32 = b.getF32Type();
    qTile = shared.view(b, p.query, {R, p.headDim + 8}, elem);
    doTile = shared.view(b, p.gradOut, {R, p.valueDim + 8}, elem);
    kTile = shared.view(b, p.key, {c, p.headDim + 8}, elem);
    vTile = shared.view(b, p.value, {c, p.valueDim + 8}, elem);
    sTile = shared.view(b, p.score, {R, c + 4}, f32);
    dpTile = shared.view(b, p.gradProb, {R, c + 4}, f32);
    dsTile = shared.view(b, p.gradScore, {R, c + 8}, elem);
    dqTile = shared.view(b, p.gradQuery, {R, p.headDim + 4}, f32);
    list = shared.view(b, p.list, {p.topK}, b.getI32Type());
    query = blockIdX(b);
    batch = arith::DivUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
    kv = arith::RemUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
    tid = threadIdX(b);
    warp = arith::DivUIOp::create(b, tid, indexConst(b, 32));
    firstHead = arith::MulIOp::create(b, kv, indexConst(b, G));
    numKeys = dimOf(b, e.arg("keys"), 2);
    Value position = arith::AddIOp::create(b, e.arg("queryOffset"), query);
    keyEnd = arith::MinUIOp::create(
        b, numKeys, arith::AddIOp::create(b, position, indexConst(b, 1)));
  }

  void build(ImplicitLocOpBuilder &b) {
    const int64_t R = p.rows.rows;
    RowSite site(b, p.rows, tid, firstHead, G);
    stageHeadRows(b, {e.arg("queries"), batch, firstHead, query, G}, R,
                  p.headDim, qTile, tid, kGradThreads);
    stageHeadRows(b, {e.arg("gradOutput"), batch, firstHead, query, G}, R,
                  p.valueDim, doTile, tid, kGradThreads);
    Value delta = rowDelta(b, site);
    Value lse = memref::LoadOp::create(b, e.arg("lse"),
                                       ValueRange{batch, site.head, query});
    Value shift = probabilityShift(b, lse, site.isHead);
    const int64_t dCols = p.rows.columns(p.headDim);
    storeRow(b, f32Splat(b, VectorType::get({dCols}, b.getF32Type()), 0.0f),
             dqTile, {site.row, site.firstColumn(b, dCols)});
    Value count =
        listAttendedBlocks(b, e.arg("selection"), {batch, kv, query}, numKeys,
                           keyEnd, p.blockSize, p.topK, tid, list);
    gpu::BarrierOp::create(b); // the list and the row tiles are visible
    buildLoop(b, indexConst(b, 0), count, ValueRange{},
              [&](ImplicitLocOpBuilder &lb, Value j,
                  ValueRange) -> SmallVector<Value> {
                step(lb, site, j, shift, delta);
                return {};
              });
    gpu::BarrierOp::create(b); // the last product is in dQ
    writeGradient(b, site);
    gpu::ReturnOp::create(b);
  }

private:
  /// D = dO . o of the thread's row (all its threads hold it), written to
  /// `delta` by the row's first thread; 0 for padding rows.
  Value rowDelta(ImplicitLocOpBuilder &b, const RowSite &site) {
    const int64_t n = p.rows.columns(p.valueDim);
    Type f32 = b.getF32Type();
    auto wide = VectorType::get({n}, f32);
    SmallVector<Value> at{batch, site.head, query, site.firstColumn(b, n)};
    Value dO = arith::ExtFOp::create(
        b, wide, loadRow(b, e.arg("gradOutput"), at, n, elem));
    Value o = arith::ExtFOp::create(b, wide,
                                    loadRow(b, e.arg("output"), at, n, elem));
    Value partial = vector::ReductionOp::create(
        b, vector::CombiningKind::ADD, arith::MulFOp::create(b, dO, o));
    Value sum = laneSum(b, partial, consecutiveLaneMasks(p.rows.threadsPerRow));
    Value delta =
        arith::SelectOp::create(b, site.isHead, sum, f32Const(b, 0.0f));
    buildIfThen(b,
                arith::AndIOp::create(
                    b, site.isHead, cmp(b, P::eq, site.part, indexConst(b, 0))),
                [&](ImplicitLocOpBuilder &wb) {
                  memref::StoreOp::create(wb, delta, e.arg("delta"),
                                          ValueRange{batch, site.head, query});
                });
    return delta;
  }

  /// List entry j: stage its keys and values, S and dP, dS, dQ += dS K.
  void step(ImplicitLocOpBuilder &b, const RowSite &site, Value j, Value shift,
            Value delta) {
    const int64_t R = p.rows.rows, c = p.blockSize;
    gpu::BarrierOp::create(b); // entry j - 1's tiles are read
    Value firstKey = arith::MulIOp::create(
        b, toIndex(b, memref::LoadOp::create(b, list, j)), indexConst(b, c));
    stageKeyRows(b, e.arg("keys"), batch, kv, firstKey, c, p.headDim, kTile,
                 tid, kGradThreads);
    stageKeyRows(b, e.arg("values"), batch, kv, firstKey, c, p.valueDim, vTile,
                 tid, kGradThreads);
    gpu::BarrierOp::create(b);
    warpSplitRowsProduct(b, qTile, R, p.headDim, kTile, c, sTile, warp,
                         kGradWarps);
    warpSplitRowsProduct(b, doTile, R, p.valueDim, vTile, c, dpTile, warp,
                         kGradWarps);
    gpu::BarrierOp::create(b);
    const int64_t n = p.rows.columns(c);
    Value col0 = site.firstColumn(b, n);
    Type f32 = b.getF32Type();
    Value visible = arith::SubIOp::create(
        b, arith::SubIOp::create(b, keyEnd, firstKey), col0);
    auto [probs, grads] =
        probabilityAndGradient(b, loadRow(b, sTile, {site.row, col0}, n, f32),
                               loadRow(b, dpTile, {site.row, col0}, n, f32),
                               visible, shift, delta, scale, n);
    (void)probs;
    storeRow(b, toElementsOf(b, grads, dsTile), dsTile, {site.row, col0});
    gpu::BarrierOp::create(b);
    warpSplitColumnsAccumulate(b, dsTile, R, c, kTile, p.headDim, dqTile, warp,
                               kGradWarps, 64 * 64);
  }

  /// dq = scale dQ for the rows that are heads.
  void writeGradient(ImplicitLocOpBuilder &b, const RowSite &site) {
    const int64_t n = p.rows.columns(p.headDim);
    Value col0 = site.firstColumn(b, n);
    buildIfThen(b, site.isHead, [&](ImplicitLocOpBuilder &wb) {
      Value acc = loadRow(wb, dqTile, {site.row, col0}, n, wb.getF32Type());
      Value scaled = arith::MulFOp::create(
          wb, acc, f32Splat(wb, VectorType::get({n}, wb.getF32Type()), scale));
      Value out = e.arg("gradQueries");
      storeRow(wb, toElementsOf(wb, scaled, out), out,
               {batch, site.head, query, col0});
    });
  }

  const Kernel &e;
  const QueryGradPlan &p;
  int64_t G;
  float scale;
  Type elem;
  Value qTile, doTile, kTile, vTile, sTile, dpTile, dsTile, dqTile, list;
  Value query, batch, kv, tid, warp, firstHead, numKeys, keyEnd;
};

/// The key kernel's body.
class KeyGradBlock {
public:
  KeyGradBlock(ImplicitLocOpBuilder &b, const Kernel &e,
               const KeyGradPlan &plan, int64_t G, int64_t kvHeads, float scale)
      : e(e), p(plan), G(G), scale(scale) {
    elem = cast<MemRefType>(e.arg("queries").getType()).getElementType();
    SharedTiles shared(b);
    const int64_t R = p.rows.rows, c = p.blockSize;
    Type f32 = b.getF32Type();
    kTile = shared.view(b, p.key, {c, p.headDim + 8}, elem);
    vTile = shared.view(b, p.value, {c, p.valueDim + 8}, elem);
    qTile = shared.view(b, p.query, {R, p.headDim + 8}, elem);
    doTile = shared.view(b, p.gradOut, {R, p.valueDim + 8}, elem);
    sTile = shared.view(b, p.score, {R, c + 4}, f32);
    dpTile = shared.view(b, p.gradProb, {R, c + 4}, f32);
    pT = shared.view(b, p.probT, {c, R + 8}, elem);
    dsT = shared.view(b, p.gradScoreT, {c, R + 8}, elem);
    dkTile = shared.view(b, p.gradKey, {c, p.headDim + 4}, f32);
    dvTile = shared.view(b, p.gradValue, {c, p.valueDim + 4}, f32);
    words = shared.view(b, p.words, {kBitWindow}, b.getI32Type());
    block = blockIdX(b);
    batch = arith::DivUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
    kv = arith::RemUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
    tid = threadIdX(b);
    warp = arith::DivUIOp::create(b, tid, indexConst(b, 32));
    firstHead = arith::MulIOp::create(b, kv, indexConst(b, G));
    numKeys = dimOf(b, e.arg("keys"), 2);
    firstKey = arith::MulIOp::create(b, block, indexConst(b, c));
  }

  void build(ImplicitLocOpBuilder &b) {
    const int64_t c = p.blockSize;
    RowSite site(b, p.rows, tid, firstHead, G);
    stageKeyRows(b, e.arg("keys"), batch, kv, firstKey, c, p.headDim, kTile,
                 tid, kGradThreads);
    stageKeyRows(b, e.arg("values"), batch, kv, firstKey, c, p.valueDim, vTile,
                 tid, kGradThreads);
    zeroTile(b, dkTile, c * (p.headDim + 4));
    zeroTile(b, dvTile, c * (p.valueDim + 4));
    forEachQuery(b,
                 [&](ImplicitLocOpBuilder &qb, Value i) { step(qb, site, i); });
    gpu::BarrierOp::create(b); // the last products are in dK and dV
    writeGradient(b, dkTile, p.headDim, e.arg("gradKeys"), scale);
    writeGradient(b, dvTile, p.valueDim, e.arg("gradValues"), 1.0f);
    gpu::ReturnOp::create(b);
  }

private:
  /// Zeroes `elems` f32 of a tile (a multiple of 4), 16 bytes a thread.
  void zeroTile(ImplicitLocOpBuilder &b, Value tile, int64_t elems) {
    auto type = cast<MemRefType>(tile.getType());
    const int64_t stride = type.getShape()[1];
    Value zeros = f32Splat(b, VectorType::get({4}, b.getF32Type()), 0.0f);
    buildLoop(b, tid, indexConst(b, elems / 4), indexConst(b, kGradThreads),
              ValueRange{},
              [&](ImplicitLocOpBuilder &lb, Value i,
                  ValueRange) -> SmallVector<Value> {
                Value at = arith::MulIOp::create(lb, i, indexConst(lb, 4));
                Value r =
                    arith::DivUIOp::create(lb, at, indexConst(lb, stride));
                Value col =
                    arith::RemUIOp::create(lb, at, indexConst(lb, stride));
                storeRow(lb, zeros, tile, {r, col});
                return {};
              });
  }

  /// Calls `body(i)` for each query i that attends the block, in index
  /// order: the bits of the block's row, a window of kBitWindow words at a
  /// time staged in shared memory. Queries before the block's first key's
  /// position cannot attend it; their words are skipped.
  void
  forEachQuery(ImplicitLocOpBuilder &b,
               llvm::function_ref<void(ImplicitLocOpBuilder &, Value)> body) {
    Value bits = e.arg("queryBits");
    Value numWords = dimOf(b, bits, 3);
    Value offset = e.arg("queryOffset");
    Value firstQuery = arith::SelectOp::create(
        b, cmp(b, P::ugt, firstKey, offset),
        arith::SubIOp::create(b, firstKey, offset), indexConst(b, 0));
    Value firstWord = arith::MinUIOp::create(
        b, arith::DivUIOp::create(b, firstQuery, indexConst(b, 32)), numWords);
    Type i32 = b.getI32Type();
    buildLoop(b, firstWord, numWords, indexConst(b, kBitWindow), ValueRange{},
              [&](ImplicitLocOpBuilder &lb, Value w0,
                  ValueRange) -> SmallVector<Value> {
                gpu::BarrierOp::create(lb); // the last window's words are read
                Value w = arith::AddIOp::create(lb, w0, tid);
                Value word = buildIf(
                    lb, cmp(lb, P::ult, w, numWords), TypeRange{i32},
                    [&](ImplicitLocOpBuilder &tb) -> SmallVector<Value> {
                      return {memref::LoadOp::create(
                          tb, bits, ValueRange{batch, kv, block, w})};
                    },
                    [&](ImplicitLocOpBuilder &fb) -> SmallVector<Value> {
                      return {arith::ConstantIntOp::create(fb, 0, 32)};
                    })[0];
                memref::StoreOp::create(lb, word, words, tid);
                gpu::BarrierOp::create(lb);
                Value inWindow = arith::MinUIOp::create(
                    lb, arith::SubIOp::create(lb, numWords, w0),
                    indexConst(lb, kBitWindow));
                buildLoop(lb, indexConst(lb, 0), inWindow, ValueRange{},
                          [&](ImplicitLocOpBuilder &wb, Value t,
                              ValueRange) -> SmallVector<Value> {
                            Value first = arith::MulIOp::create(
                                wb, arith::AddIOp::create(wb, w0, t),
                                indexConst(wb, 32));
                            forEachBit(wb, memref::LoadOp::create(wb, words, t),
                                       first, body);
                            return {};
                          });
                return {};
              });
  }

  /// body(first + b) for each set bit b of `word`, lowest first.
  static void
  forEachBit(ImplicitLocOpBuilder &b, Value word, Value first,
             llvm::function_ref<void(ImplicitLocOpBuilder &, Value)> body) {
    Type i32 = b.getI32Type();
    auto loop = scf::WhileOp::create(
        b, TypeRange{i32}, ValueRange{word},
        [&](OpBuilder &ob, Location loc, ValueRange args) {
          ImplicitLocOpBuilder cb(loc, ob);
          Value more = arith::CmpIOp::create(
              cb, P::ne, args[0], arith::ConstantIntOp::create(cb, 0, 32));
          scf::ConditionOp::create(cb, more, args);
        },
        [&](OpBuilder &ob, Location loc, ValueRange args) {
          ImplicitLocOpBuilder lb(loc, ob);
          Value bit = math::CountTrailingZerosOp::create(lb, args[0]);
          body(lb, arith::AddIOp::create(lb, first, toIndex(lb, bit)));
          Value rest = arith::AndIOp::create(
              lb, args[0],
              arith::SubIOp::create(lb, args[0],
                                    arith::ConstantIntOp::create(lb, 1, 32)));
          scf::YieldOp::create(lb, rest);
        });
    (void)loop;
  }

  /// Query i's contribution: stage its head rows, S and dP, P and dS
  /// transposed, dV += P^T dO and dK += dS^T Q.
  void step(ImplicitLocOpBuilder &b, const RowSite &site, Value i) {
    const int64_t R = p.rows.rows, c = p.blockSize;
    Type f32 = b.getF32Type();
    gpu::BarrierOp::create(b); // the last query's tiles are read
    stageHeadRows(b, {e.arg("queries"), batch, firstHead, i, G}, R, p.headDim,
                  qTile, tid, kGradThreads);
    stageHeadRows(b, {e.arg("gradOutput"), batch, firstHead, i, G}, R,
                  p.valueDim, doTile, tid, kGradThreads);
    Value lse = memref::LoadOp::create(b, e.arg("lse"),
                                       ValueRange{batch, site.head, i});
    Value delta = memref::LoadOp::create(b, e.arg("delta"),
                                         ValueRange{batch, site.head, i});
    Value shift = probabilityShift(b, lse, site.isHead);
    gpu::BarrierOp::create(b);
    warpSplitRowsProduct(b, qTile, R, p.headDim, kTile, c, sTile, warp,
                         kGradWarps);
    warpSplitRowsProduct(b, doTile, R, p.valueDim, vTile, c, dpTile, warp,
                         kGradWarps);
    gpu::BarrierOp::create(b);
    const int64_t n = p.rows.columns(c);
    Value col0 = site.firstColumn(b, n);
    Value position = arith::AddIOp::create(b, e.arg("queryOffset"), i);
    Value keyEnd = arith::MinUIOp::create(
        b, numKeys, arith::AddIOp::create(b, position, indexConst(b, 1)));
    Value visible = arith::SubIOp::create(
        b, arith::SubIOp::create(b, keyEnd, firstKey), col0);
    auto [probs, grads] =
        probabilityAndGradient(b, loadRow(b, sTile, {site.row, col0}, n, f32),
                               loadRow(b, dpTile, {site.row, col0}, n, f32),
                               visible, shift, delta, scale, n);
    Value probsElem =
        arith::TruncFOp::create(b, VectorType::get({n}, elem), probs);
    Value gradsElem =
        arith::TruncFOp::create(b, VectorType::get({n}, elem), grads);
    for (int64_t x = 0; x < n; ++x) {
      Value key = arith::AddIOp::create(b, col0, indexConst(b, x));
      memref::StoreOp::create(b, vector::ExtractOp::create(b, probsElem, x), pT,
                              ValueRange{key, site.row});
      memref::StoreOp::create(b, vector::ExtractOp::create(b, gradsElem, x),
                              dsT, ValueRange{key, site.row});
    }
    gpu::BarrierOp::create(b);
    warpSplitColumnsAccumulate(b, pT, c, R, doTile, p.valueDim, dvTile, warp,
                               kGradWarps, 64 * 32);
    warpSplitColumnsAccumulate(b, dsT, c, R, qTile, p.headDim, dkTile, warp,
                               kGradWarps, 64 * 32);
  }

  /// out[key] = scale acc[key] for the block's keys before N, 4 values a
  /// thread at a time.
  void writeGradient(ImplicitLocOpBuilder &b, Value acc, int64_t width,
                     Value out, float factor) {
    const int64_t c = p.blockSize;
    auto quad = VectorType::get({4}, b.getF32Type());
    buildLoop(
        b, tid, indexConst(b, c * width / 4), indexConst(b, kGradThreads),
        ValueRange{},
        [&](ImplicitLocOpBuilder &lb, Value i,
            ValueRange) -> SmallVector<Value> {
          Value r = arith::DivUIOp::create(lb, i, indexConst(lb, width / 4));
          Value col = arith::MulIOp::create(
              lb, arith::RemUIOp::create(lb, i, indexConst(lb, width / 4)),
              indexConst(lb, 4));
          Value key = arith::AddIOp::create(lb, firstKey, r);
          buildIfThen(lb, cmp(lb, P::ult, key, numKeys),
                      [&](ImplicitLocOpBuilder &wb) {
                        Value v = arith::MulFOp::create(
                            wb, loadRow(wb, acc, {r, col}, 4, wb.getF32Type()),
                            f32Splat(wb, quad, factor));
                        storeRow(wb, toElementsOf(wb, v, out), out,
                                 {batch, kv, key, col});
                      });
          return {};
        });
  }

  const Kernel &e;
  const KeyGradPlan &p;
  int64_t G;
  float scale;
  Type elem;
  Value kTile, vTile, qTile, doTile, sTile, dpTile, pT, dsT, dkTile, dvTile,
      words;
  Value block, batch, kv, tid, warp, firstHead, numKeys, firstKey;
};

struct GradQueriesToGPU : KernelOpPattern<SparseAttentionGradQueriesKernelOp> {
  using KernelOpPattern::KernelOpPattern;

  void lower(SparseAttentionGradQueriesKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    MemRefType qType = bufferType(op.getQueries());
    const int64_t kvHeads = bufferType(op.getKeys()).getShape()[1];
    const int64_t G = qType.getShape()[1] / kvHeads;
    const QueryGradPlan plan(
        G, qType.getShape()[3], bufferType(op.getValues()).getShape()[3],
        op.getBlockSize(), bufferType(op.getSelection()).getShape()[3]);
    KernelConfigAttr config = getKernelConfig(op);
    Kernel kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      kernel = createKernel(rewriter, op, "sparse_attention_grad_queries",
                            {{"queries", qType},
                             {"keys", bufferType(op.getKeys())},
                             {"values", bufferType(op.getValues())},
                             {"selection", bufferType(op.getSelection())},
                             {"queryOffset", rewriter.getIndexType()},
                             {"output", bufferType(op.getOutput())},
                             {"lse", bufferType(op.getLse())},
                             {"gradOutput", bufferType(op.getGradOutput())},
                             {"gradQueries", bufferType(op.getGradQueries())},
                             {"delta", bufferType(op.getDelta())}});
      applyOccupancyHint(kernel.func(), config);
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      QueryGradBlock(b, kernel, plan, G, kvHeads,
                     op.getScale().convertToFloat())
          .build(b);
    }
    Value groups = arith::MulIOp::create(host, dimOf(host, op.getQueries(), 0),
                                         indexConst(host, kvHeads));
    launch(host, kernel, dimOf(host, op.getQueries(), 2), groups,
           config.getThreads(),
           {{"queries", op.getQueries()},
            {"keys", op.getKeys()},
            {"values", op.getValues()},
            {"selection", op.getSelection()},
            {"queryOffset", op.getQueryOffset()},
            {"output", op.getOutput()},
            {"lse", op.getLse()},
            {"gradOutput", op.getGradOutput()},
            {"gradQueries", op.getGradQueries()},
            {"delta", op.getDelta()}},
           plan.bytes);
  }
};

/// The kernel that zeroes the query bits: one thread per word of a (batch
/// x KV head)'s rows.
Kernel buildZeroBits(PatternRewriter &rewriter, Operation *op, Value bits) {
  OpBuilder::InsertionGuard guard(rewriter);
  MemRefType type = cast<MemRefType>(bits.getType());
  Kernel kernel =
      createKernel(rewriter, op, "zero_query_bits", {{"bits", type}});
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  const int64_t kvHeads = type.getShape()[1];
  Value bitsArg = kernel.arg("bits");
  Value words =
      arith::MulIOp::create(b, dimOf(b, bitsArg, 2), dimOf(b, bitsArg, 3));
  Value at = arith::AddIOp::create(
      b, arith::MulIOp::create(b, blockIdX(b), indexConst(b, kMarkThreads)),
      threadIdX(b));
  buildIfThen(b, cmp(b, P::ult, at, words), [&](ImplicitLocOpBuilder &wb) {
    Value row = arith::DivUIOp::create(wb, at, dimOf(wb, bitsArg, 3));
    Value word = arith::RemUIOp::create(wb, at, dimOf(wb, bitsArg, 3));
    memref::StoreOp::create(
        wb, arith::ConstantIntOp::create(wb, 0, 32), bitsArg,
        ValueRange{
            arith::DivUIOp::create(wb, blockIdY(wb), indexConst(wb, kvHeads)),
            arith::RemUIOp::create(wb, blockIdY(wb), indexConst(wb, kvHeads)),
            row, word});
  });
  gpu::ReturnOp::create(b);
  return kernel;
}

/// The kernel that sets bit i of every block query i attends: one thread
/// per (query, batch x KV head), the forward's rule for which entries
/// count.
Kernel buildMarkQueries(PatternRewriter &rewriter,
                        SparseAttentionGradKeysKernelOp op, int64_t topK) {
  OpBuilder::InsertionGuard guard(rewriter);
  MemRefType bitsType = bufferType(op.getQueryBits());
  Kernel kernel = createKernel(rewriter, op, "mark_attending_queries",
                               {{"selection", bufferType(op.getSelection())},
                                {"keys", bufferType(op.getKeys())},
                                {"queryOffset", rewriter.getIndexType()},
                                {"bits", bitsType}});
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  const int64_t kvHeads = bitsType.getShape()[1];
  Value selection = kernel.arg("selection"), bits = kernel.arg("bits");
  Value query = arith::AddIOp::create(
      b, arith::MulIOp::create(b, blockIdX(b), indexConst(b, kMarkThreads)),
      threadIdX(b));
  Value batch = arith::DivUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
  Value kv = arith::RemUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
  buildIfThen(
      b, cmp(b, P::ult, query, dimOf(b, selection, 2)),
      [&](ImplicitLocOpBuilder &qb) {
        Value numKeys = dimOf(qb, kernel.arg("keys"), 2);
        Value position =
            arith::AddIOp::create(qb, kernel.arg("queryOffset"), query);
        Value keyEnd = arith::MinUIOp::create(
            qb, numKeys,
            arith::AddIOp::create(qb, position, indexConst(qb, 1)));
        Value word = arith::DivUIOp::create(qb, query, indexConst(qb, 32));
        Value mask = arith::ShLIOp::create(
            qb, arith::ConstantIntOp::create(qb, 1, 32),
            toI32(qb, arith::RemUIOp::create(qb, query, indexConst(qb, 32))));
        walkAttendedBlocks(
            qb, selection, {batch, kv, query}, numKeys, keyEnd,
            op.getBlockSize(), topK,
            [&](ImplicitLocOpBuilder &lb, Value attended, Value s32, Value) {
              buildIfThen(lb, attended, [&](ImplicitLocOpBuilder &ab) {
                memref::AtomicRMWOp::create(
                    ab, arith::AtomicRMWKind::ori, mask, bits,
                    ValueRange{batch, kv, toIndex(ab, s32), word});
              });
            });
      });
  gpu::ReturnOp::create(b);
  return kernel;
}

struct GradKeysToGPU : KernelOpPattern<SparseAttentionGradKeysKernelOp> {
  using KernelOpPattern::KernelOpPattern;

  void lower(SparseAttentionGradKeysKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    MemRefType qType = bufferType(op.getQueries());
    const int64_t kvHeads = bufferType(op.getKeys()).getShape()[1];
    const int64_t G = qType.getShape()[1] / kvHeads;
    const int64_t topK = bufferType(op.getSelection()).getShape()[3];
    const KeyGradPlan plan(G, qType.getShape()[3],
                           bufferType(op.getValues()).getShape()[3],
                           op.getBlockSize());
    KernelConfigAttr config = getKernelConfig(op);
    Kernel zero = buildZeroBits(rewriter, op, op.getQueryBits());
    Kernel mark = buildMarkQueries(rewriter, op, topK);
    Kernel kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      kernel = createKernel(rewriter, op, "sparse_attention_grad_keys",
                            {{"queries", qType},
                             {"keys", bufferType(op.getKeys())},
                             {"values", bufferType(op.getValues())},
                             {"queryOffset", rewriter.getIndexType()},
                             {"lse", bufferType(op.getLse())},
                             {"delta", bufferType(op.getDelta())},
                             {"gradOutput", bufferType(op.getGradOutput())},
                             {"queryBits", bufferType(op.getQueryBits())},
                             {"gradKeys", bufferType(op.getGradKeys())},
                             {"gradValues", bufferType(op.getGradValues())}});
      applyOccupancyHint(kernel.func(), config);
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      KeyGradBlock(b, kernel, plan, G, kvHeads, op.getScale().convertToFloat())
          .build(b);
    }
    Value bits = op.getQueryBits();
    Value groups = arith::MulIOp::create(host, dimOf(host, op.getQueries(), 0),
                                         indexConst(host, kvHeads));
    Value words =
        arith::MulIOp::create(host, dimOf(host, bits, 2), dimOf(host, bits, 3));
    launch(host, zero,
           host.createOrFold<arith::CeilDivUIOp>(
               words, indexConst(host, kMarkThreads)),
           groups, kMarkThreads, {{"bits", bits}});
    launch(host, mark,
           host.createOrFold<arith::CeilDivUIOp>(
               dimOf(host, op.getQueries(), 2), indexConst(host, kMarkThreads)),
           groups, kMarkThreads,
           {{"selection", op.getSelection()},
            {"keys", op.getKeys()},
            {"queryOffset", op.getQueryOffset()},
            {"bits", bits}});
    launch(host, kernel, dimOf(host, bits, 2), groups, config.getThreads(),
           {{"queries", op.getQueries()},
            {"keys", op.getKeys()},
            {"values", op.getValues()},
            {"queryOffset", op.getQueryOffset()},
            {"lse", op.getLse()},
            {"delta", op.getDelta()},
            {"gradOutput", op.getGradOutput()},
            {"queryBits", bits},
            {"gradKeys", op.getGradKeys()},
            {"gradValues", op.getGradValues()}},
           plan.bytes);
  }
};

} // namespace

void mlir::pisa::detail::populateAttentionGradPatterns(
    RewritePatternSet &patterns) {
  patterns.add<GradQueriesToGPU, GradKeysToGPU>(patterns.getContext());
}
