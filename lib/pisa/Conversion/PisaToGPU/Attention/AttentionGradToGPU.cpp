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
// pisa.kernel.sparse_attention_grad_keys (dk and dv) is in
// AttentionGradKeys.cpp; the plans, the limits and the row arithmetic both
// kernels share are here.
//
// All products on tensor cores through --pisa-vector-to-mma-sync with f32
// accumulation; P and dS are rounded to the element type before the
// products that take them, as FlashAttention's backward does. Every sum
// runs in an order fixed by the data (the attended blocks of a query, the
// queries of a block in index order, the segments in rank order): the
// result is deterministic.
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionGrad.h"
#include "Attention/AttentionSteps.h"
#include "Attention/SparseAttention.h"
#include "Attention/WarpQueryGrad.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/RowSoftmax.h"
#include "Kernels/WarpgroupMma.h"
#include "Selection/QueryKernels.h"

#include "../Common/LoopBuilders.h"

#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

using P = arith::CmpIPredicate;

GradRows::GradRows(int64_t rows, int64_t rowsPerToken)
    : rows(rows), rowsPerToken(rowsPerToken), tokens(rows / rowsPerToken),
      threadsPerRow(kGradThreads / rows) {}

static int64_t queryRows(int64_t G) { return G <= 16 ? 16 : G <= 32 ? 32 : 64; }

QueryGradPlan::QueryGradPlan(int64_t G, int64_t d, int64_t dv, int64_t c,
                             int64_t topK)
    : rows(queryRows(G), queryRows(G)), headDim(d), valueDim(dv), blockSize(c),
      topK(topK) {
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

bool mlir::pisa::detail::keyGradientsInRegisters(Type elem, int64_t d,
                                                 int64_t dv, int64_t c) {
  return elem.getIntOrFloatBitWidth() == 16 &&
         (c == 16 || c == 32 || c == 64) && d % 16 == 0 && dv % 16 == 0 &&
         d + dv <= 256;
}

bool mlir::pisa::detail::keyGradientsOnWarpgroup(Type elem, int64_t d,
                                                 int64_t dv, int64_t c) {
  return elem.getIntOrFloatBitWidth() == 16 && c == kWarpgroupRows &&
         d % kSwizzleColumns == 0 && dv % kSwizzleColumns == 0 && d + dv <= 256;
}

KeyGradPlan::KeyGradPlan(int64_t G, int64_t d, int64_t dv, int64_t c,
                         bool inRegisters, bool warpgroup, bool scores)
    : rows(64, int64_t(llvm::PowerOf2Ceil(G))), headDim(d), valueDim(dv),
      blockSize(c), inRegisters(inRegisters),
      warpgroup(inRegisters && warpgroup), scores(inRegisters && scores) {
  const int64_t R = rows.rows;
  int64_t at = 0;
  // A 16-bit tile: rows padded by 8 elements (ldmatrix's rows in distinct
  // banks), or swizzled at a 1024-byte boundary.
  auto tile = [&](int64_t tileRows, int64_t width) {
    if (!this->warpgroup)
      return SharedTiles::place(at, tileRows * (width + 8) * 2);
    at = llvm::alignTo(at, kSwizzleAtomBytes);
    return SharedTiles::place(at, swizzledTileBytes(tileRows, width));
  };
  key = tile(c, d);
  value = tile(c, dv);
  query = tile(R, d);
  gradOut = tile(R, dv);
  if (inRegisters) {
    queryNext = tile(R, d);
    gradOutNext = tile(R, dv);
  }
  const int64_t tilesEnd = at;
  const int64_t sumBytes = c * (d + 4) * 4, valueSumBytes = c * (dv + 4) * 4;
  if (inRegisters) {
    for (int64_t i = 0; i < 2; ++i) {
      rowLse[i] = SharedTiles::place(at, R * 4);
      rowDelta[i] = SharedTiles::place(at, R * 4);
      rowVisible[i] = SharedTiles::place(at, R * 4);
    }
    // The sums are written after the last step, over the 16-bit tiles
    // where they fit.
    if (int64_t(llvm::alignTo(sumBytes, 16)) + valueSumBytes <= tilesEnd) {
      int64_t over = 0;
      gradKey = SharedTiles::place(over, sumBytes);
      gradValue = SharedTiles::place(over, valueSumBytes);
    } else {
      gradKey = SharedTiles::place(at, sumBytes);
      gradValue = SharedTiles::place(at, valueSumBytes);
    }
  } else {
    score = SharedTiles::place(at, R * (c + 4) * 4);
    gradProb = SharedTiles::place(at, R * (c + 4) * 4);
    probT = SharedTiles::place(at, c * (R + 8) * 2);
    gradScoreT = SharedTiles::place(at, c * (R + 8) * 2);
    gradKey = SharedTiles::place(at, sumBytes);
    gradValue = SharedTiles::place(at, valueSumBytes);
  }
  // A window's queries after the fewer than stepsAhead x rows.tokens left
  // from the last: the register kernel gathers that many before it steps,
  // so that most steps' rows are copied while the one before computes.
  stepsAhead = inRegisters ? kKeyStepsAhead : 1;
  listCapacity = stepsAhead * rows.tokens - 1 + kListWindow;
  list = SharedTiles::place(at, listCapacity * 4);
  listCount = SharedTiles::place(at, 4);
  if (this->scores)
    for (int64_t i = 0; i < 2; ++i) {
      rowQuery[i] = SharedTiles::place(at, R * 4);
      rowColumn[i] = SharedTiles::place(at, R * 4);
    }
  bytes = at + (this->warpgroup ? kSwizzleAtomBytes - 16 : 0);
}

std::optional<std::string> mlir::pisa::detail::attentionGradLimitViolation(
    Type elem, int64_t G, int64_t d, int64_t dv, int64_t c, int64_t topK) {
  static const AttentionKernelRules backward{
      "the GPU backward", "tensor cores", 32,
      "four warps split dq's and dk's columns",
      "the register kernels take the sizes (G <= 16, d up to 128, d + dv "
      "up to 256)"};
  if (std::optional<std::string> why =
          attentionTileViolation(backward, elem, G, d, dv, c, topK,
                                 queryTileGradFits(elem, G, d, dv, 16) &&
                                     keyGradientsInRegisters(elem, d, dv, 16)))
    return why;
  // The kernels --pisa-configure-kernels chooses by default.
  const int64_t queryBytes =
      queryGradInRegisters(elem, G, d, dv, c)
          ? RegisterQueryGradPlan(d, dv, c, topK).bytes
      : queryTileGradFits(elem, G, d, dv, c)
          ? QueryTileGradPlan(kGradTileQueries, d, dv, c, topK).bytes
          : QueryGradPlan(G, d, dv, c, topK).bytes;
  const int64_t bytes = std::max(
      queryBytes,
      KeyGradPlan(G, d, dv, c, keyGradientsInRegisters(elem, d, dv, c)).bytes);
  if (bytes <= kMaxAttentionSharedBytes)
    return std::nullopt;
  std::string why;
  llvm::raw_string_ostream(why)
      << "needs " << bytes << " bytes of shared memory per block for the "
      << "backward, above the " << kMaxAttentionSharedBytes
      << " an sm_90 block may use";
  return why;
}

namespace mlir::pisa::detail {

RowSite::RowSite(ImplicitLocOpBuilder &b, const GradRows &rows, Value tid,
                 Value firstHead, int64_t G) {
  row = arith::DivUIOp::create(b, tid, indexConst(b, rows.threadsPerRow));
  part = arith::RemUIOp::create(b, tid, indexConst(b, rows.threadsPerRow));
  slot = indexConst(b, 0);
  Value h = row;
  if (rows.tokens > 1) {
    slot = arith::DivUIOp::create(b, row, indexConst(b, rows.rowsPerToken));
    h = arith::RemUIOp::create(b, row, indexConst(b, rows.rowsPerToken));
  }
  isHead = cmp(b, P::ult, h, indexConst(b, G));
  head = arith::AddIOp::create(
      b, firstHead, arith::MinUIOp::create(b, h, indexConst(b, G - 1)));
}

Value RowSite::firstColumn(ImplicitLocOpBuilder &b, int64_t columns) const {
  return arith::MulIOp::create(b, part, indexConst(b, columns));
}

/// The exponent shift of a head row: lse log2 e, or +inf where the row
/// has no probability (a padding row, or lse = -inf: P = 0 by the
/// contract), so that exp2(logit - shift) is 0 there.
Value probabilityShift(ImplicitLocOpBuilder &b, Value lse, Value isHead) {
  const float inf = std::numeric_limits<float>::infinity();
  Value use = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, lse,
                                    f32Const(b, -inf));
  if (isHead)
    use = arith::AndIOp::create(b, isHead, use);
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

} // namespace mlir::pisa::detail

namespace {

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
    keys = queryKeysOf(b, e, query);
    numKeys = keys.numKeys;
    keyEnd = arith::MinUIOp::create(
        b, numKeys, arith::AddIOp::create(b, keys.position, indexConst(b, 1)));
  }

  void build(ImplicitLocOpBuilder &b) {
    const int64_t R = p.rows.rows;
    RowSite site(b, p.rows, tid, firstHead, G);
    auto token = [&](ImplicitLocOpBuilder &, Value) { return query; };
    stageHeadRows(b, {e.arg("queries"), batch, firstHead, G, R, token}, R,
                  p.headDim, qTile, tid, kGradThreads);
    stageHeadRows(b, {e.arg("gradOutput"), batch, firstHead, G, R, token}, R,
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
    // Rows past the sequence's keys (the next one's, or zeros past the
    // buffer) are masked below.
    Value firstRow = keys.row(b, firstKey);
    stageKeyRows(b, e.arg("keys"), batch, kv, firstRow, c, p.headDim, kTile,
                 tid, kGradThreads);
    stageKeyRows(b, e.arg("values"), batch, kv, firstRow, c, p.valueDim, vTile,
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
      auto rowType = VectorType::get({n}, wb.getF32Type());
      Value factor = nanIfBroken(wb, keys, f32Const(wb, scale));
      Value scaled = arith::MulFOp::create(
          wb, acc, vector::BroadcastOp::create(wb, rowType, factor));
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
  QueryKeys keys;
  Value query, batch, kv, tid, warp, firstHead, numKeys, keyEnd;
};

struct GradQueriesToGPU : KernelOpPattern<SparseAttentionGradQueriesKernelOp> {
  using KernelOpPattern::KernelOpPattern;

  void lower(SparseAttentionGradQueriesKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    MemRefType qType = bufferType(op.getQueries());
    const int64_t kvHeads = bufferType(op.getKeys()).getShape()[1];
    const int64_t G = qType.getShape()[1] / kvHeads;
    const int64_t d = qType.getShape()[3];
    const int64_t dv = bufferType(op.getValues()).getShape()[3];
    const int64_t topK = bufferType(op.getSelection()).getShape()[3];
    const QueryGradPlan plan(G, d, dv, op.getBlockSize(), topK);
    KernelConfigAttr config = getKernelConfig(op);
    // Queries a block on query tiles; else the register kernel (a warp a
    // query) or the staged one (a query a block), by the epilogue.
    const int64_t tileQueries = config.getUnionQueries().value_or(0);
    const bool onTiles = tileQueries > 0;
    const bool inRegisters =
        !onTiles && config.getEpilogue() == KernelEpilogue::Registers;
    const QueryTileGradPlan tilePlan(std::max<int64_t>(tileQueries, 1), d, dv,
                                     op.getBlockSize(), topK);
    RegisterQueryGradPlan registerPlan(d, dv, op.getBlockSize(), topK);
    registerPlan.prefetchEntries = config.getPrefetchAhead().value_or(0);
    SmallVector<KernelOperand> operands = forwardOperands(op);
    operands.append({{"gradOutput", op.getGradOutput()},
                     {"gradQueries", op.getGradQueries()},
                     {"delta", op.getDelta()}});
    addPackedOperands(operands, op.getCuSeqlensQ(), op.getCuSeqlensK());
    Kernel kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      kernel = createKernelFor(rewriter, op, "sparse_attention_grad_queries",
                               operands);
      applyOccupancyHint(kernel.func(), config);
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      const float scale = op.getScale().convertToFloat();
      if (onTiles)
        buildQueryTileGrad(b, kernel, tilePlan, G, kvHeads, scale);
      else if (inRegisters)
        buildRegisterQueryGrad(b, kernel, registerPlan, G, kvHeads, scale);
      else
        QueryGradBlock(b, kernel, plan, G, kvHeads, scale).build(b);
    }
    Value groups = arith::MulIOp::create(host, dimOf(host, op.getQueries(), 0),
                                         indexConst(host, kvHeads));
    // The query-tile kernel takes W queries a block, the register kernel
    // kRegisterGradQueries.
    Value gridX = dimOf(host, op.getQueries(), 2);
    const int64_t blockQueries = onTiles       ? tileQueries
                                 : inRegisters ? kRegisterGradQueries
                                               : 1;
    if (blockQueries > 1)
      gridX = host.createOrFold<arith::CeilDivUIOp>(
          gridX, indexConst(host, blockQueries));
    launch(host, kernel, gridX, groups, config.getThreads(), operands,
           onTiles       ? tilePlan.bytes
           : inRegisters ? registerPlan.bytes
                         : plan.bytes);
  }
};

} // namespace

void mlir::pisa::detail::populateAttentionGradPatterns(
    RewritePatternSet &patterns) {
  patterns.add<GradQueriesToGPU>(patterns.getContext());
  populateAttentionGradKeysPatterns(patterns);
  populateAttentionGradScoresPatterns(patterns);
}
