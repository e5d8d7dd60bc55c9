//===- QueryGradFromScores.cpp - dq from the key half's dS tiles ----------===//
//
// The backward where dq comes from the dS tiles the key kernel stores
// (`scores` on pisa.kernel.sparse_attention_grad_keys) instead of a pass
// that recomputes S, dP and dS:
//
//   sparse_attention_grad_delta   D = dO . o per head row, before the key
//                                 kernel (which reads D); a quad of lanes
//                                 a row, each summing a quarter of it
//   sparse_attention_grad_queries_from_scores
//                                 a warp per query (WarpPerQuery.h), four
//                                 a block: for each attended block in
//                                 order, K's rows copied into the warp's
//                                 tile (cp.async) while dS's A fragments
//                                 are read from the query's tiles, then
//                                 dQ += dS K (WarpFragments::accumulateKN)
//
// so that the dq pass gathers K alone, with one product a block: the
// forward's and the key kernel's rule decides the blocks and their order,
// which is the order of the query's tiles in `scores`.
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionGrad.h"
#include "Attention/AttentionSteps.h"
#include "Attention/SparseAttention.h"
#include "Attention/WarpPerQuery.h"
#include "Attention/WarpQueryGrad.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/TileCopy.h"
#include "Kernels/WarpMma.h"
#include "Selection/QueryKernels.h"

#include "../Common/LoopBuilders.h"

#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

using P = arith::CmpIPredicate;

namespace {

/// Head rows a block of the D kernel takes: a quad of lanes each.
constexpr int64_t kDeltaRowsPerBlock = kGradThreads / 4;

/// The dq kernel's shared memory: each warp's K tile [C x d] (16-bit,
/// rows padded by 8 elements for ldmatrix), then each warp's list of
/// attended blocks [K] (i32).
struct ScoresGradPlan {
  int64_t warpBytes, listOffset, listBytes, bytes;
  ScoresGradPlan(int64_t d, int64_t c, int64_t topK) {
    warpBytes = llvm::alignTo(c * (d + kChunkElems) * 2, 16);
    listOffset = kRegisterGradQueries * warpBytes;
    listBytes = llvm::alignTo(topK * 4, 16);
    bytes = listOffset + kRegisterGradQueries * listBytes;
  }
};

/// The dq kernel's body: a warp per query.
class ScoresGradKernel : WarpPerQuery {
public:
  ScoresGradKernel(ImplicitLocOpBuilder &b, const Kernel &e,
                   const ScoresGradPlan &plan, int64_t groupSize,
                   int64_t headDim, int64_t blockSize, int64_t topK,
                   int64_t kvHeads, float scale, bool prefetchNext)
      : WarpPerQuery(b, e, kvHeads, blockSize, topK), G(groupSize),
        headDim(headDim), scale(scale), prefetchNext(prefetchNext) {
    keyTile = tiles.viewAt(
        b, arith::MulIOp::create(b, warp, indexConst(b, plan.warpBytes)),
        {blockSize, headDim + kChunkElems}, elem);
    list = tiles.viewAt(
        b,
        arith::AddIOp::create(
            b, indexConst(b, plan.listOffset),
            arith::MulIOp::create(b, warp, indexConst(b, plan.listBytes))),
        {topK}, b.getI32Type());
    if (prefetchNext)
      scoresL2.emplace(b, e.arg("scores"));
  }

  void build(ImplicitLocOpBuilder &b) {
    forEachQuery(b, kRegisterGradQueries,
                 [&](ImplicitLocOpBuilder &qb, Value q, Value batchRules) {
                   gradQuery(qb, q, batchRules);
                 });
  }

private:
  void gradQuery(ImplicitLocOpBuilder &b, Value q, Value batchRules) {
    Value count = beginQuery(b, q, batchRules, list);
    WarpQueryGrad rows(e, *this, query, arith::ConstantIntOp::create(b, 1, 1),
                       keys, G, headDim, scale);
    syncWarp(b); // the list is visible to the warp
    auto accType = VectorType::get({2, 2}, b.getF32Type());
    SmallVector<Value> init(
        headDim / kMmaCols,
        arith::ConstantOp::create(b, accType, b.getZeroAttr(accType)));
    SmallVector<Value> dq = buildLoop(
        b, indexConst(b, 0), count, indexConst(b, 1), init,
        [&](ImplicitLocOpBuilder &lb, Value j,
            ValueRange acc) -> SmallVector<Value> { return step(lb, j, acc); });
    rows.write(b, dq);
  }

  /// Attended block j: K's rows into the warp's tile while dS's fragments
  /// are read, then dQ += dS K.
  SmallVector<Value> step(ImplicitLocOpBuilder &b, Value j,
                          ValueRange acc) const {
    Entry entry = beginEntry(b, list, j, e.arg("keys"), keyTile, headDim);
    if (prefetchNext)
      prefetchNextTile(b, j);
    SmallVector<Value> fragments = scoreFragments(b, j);
    nvgpu::DeviceAsyncWaitOp::create(b, entry.copied, b.getI32IntegerAttr(0));
    syncWarp(b); // K is in the tile, seen by every lane
    WarpFragments frags{lane, elem};
    SmallVector<Value> next(acc.begin(), acc.end());
    for (auto [u, a] : llvm::enumerate(fragments))
      for (size_t t = 0; t < next.size(); ++t)
        next[t] = frags.accumulateKN(b, a, keyTile, indexConst(b, u * kMmaK),
                                     t * kMmaCols, next[t]);
    return next;
  }

  /// Lane 0 asks the L2 for tile j + 1 of the query's row of `scores`
  /// (G C 16-bit elements, contiguous) while tile j is read.
  void prefetchNextTile(ImplicitLocOpBuilder &b, Value j) const {
    Value next = arith::AddIOp::create(b, j, indexConst(b, 1));
    Value inside =
        arith::AndIOp::create(b, cmp(b, P::eq, lane, indexConst(b, 0)),
                              cmp(b, P::ult, next, indexConst(b, topK)));
    buildIfThen(b, inside, [&](ImplicitLocOpBuilder &tb) {
      scoresL2->fetch(
          tb,
          {batch, kv, query,
           arith::MulIOp::create(tb, next, indexConst(tb, G * blockSize))},
          G * blockSize * elem.getIntOrFloatBitWidth() / 8);
    });
  }

  /// dS's A fragments of tile j of the query's row of `scores`, one a k16
  /// step of the block's keys: lane (g, tig) reads rows g and g + 8 (heads;
  /// those past G read head G - 1, whose dq rows are not written) at keys
  /// 2 tig, 2 tig + 1 and the same + 8.
  SmallVector<Value> scoreFragments(ImplicitLocOpBuilder &b, Value j) const {
    Value scores = e.arg("scores");
    auto pairType = VectorType::get({2}, elem);
    Value tileRow0 = arith::MulIOp::create(b, j, indexConst(b, G));
    auto rowStart = [&](int64_t half) -> Value {
      Value head = arith::MinUIOp::create(
          b, arith::AddIOp::create(b, gid, indexConst(b, 8 * half)),
          indexConst(b, G - 1));
      return arith::MulIOp::create(b, arith::AddIOp::create(b, tileRow0, head),
                                   indexConst(b, blockSize));
    };
    Value starts[2] = {rowStart(0), rowStart(1)};
    Value col0 = arith::MulIOp::create(b, tig, indexConst(b, 2));
    SmallVector<Value> fragments;
    for (int64_t u = 0; u < blockSize / kMmaK; ++u) {
      auto pair = [&](int64_t half, int64_t k) -> Value {
        Value col = arith::AddIOp::create(
            b, starts[half],
            arith::AddIOp::create(b, col0, indexConst(b, u * kMmaK + k)));
        return vector::LoadOp::create(b, pairType, scores,
                                      ValueRange{batch, kv, query, col}, false,
                                      llvm::MaybeAlign(4));
      };
      // a0 a1: row g, k 2 tig..; a2 a3: row g + 8; then the same at k + 8.
      fragments.push_back(
          mmaFragment(b, {pair(0, 0), pair(1, 0), pair(0, 8), pair(1, 8)}));
    }
    return fragments;
  }

  int64_t G, headDim;
  float scale;
  /// kernel_config prefetch_ahead = 1.
  bool prefetchNext;
  Value keyTile, list;
  /// The address of `scores` for the prefetch, read once a kernel.
  std::optional<L2Prefetch> scoresL2;
};

/// sparse_attention_grad_delta: a quad of lanes per (head row, batch), the
/// rows of a head consecutive queries.
Kernel buildDeltaKernel(PatternRewriter &rewriter,
                        SparseAttentionGradDeltaKernelOp op,
                        ArrayRef<KernelOperand> operands) {
  OpBuilder::InsertionGuard guard(rewriter);
  Kernel kernel =
      createKernelFor(rewriter, op, "sparse_attention_grad_delta", operands);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  Value out = kernel.arg("output"), gradOut = kernel.arg("gradOutput");
  Value delta = kernel.arg("delta");
  MemRefType type = cast<MemRefType>(out.getType());
  const int64_t dv = type.getShape()[3];
  Type elem = type.getElementType(), f32 = b.getF32Type();
  Value numQueries = dimOf(b, out, 2);
  Value rows =
      arith::MulIOp::create(b, dimOf(b, out, 1), numQueries); // Hq x Nq
  Value tid = threadIdX(b);
  Value row = arith::AddIOp::create(
      b,
      arith::MulIOp::create(b, blockIdX(b), indexConst(b, kDeltaRowsPerBlock)),
      arith::DivUIOp::create(b, tid, indexConst(b, 4)));
  Value quarter = arith::RemUIOp::create(b, tid, indexConst(b, 4));
  Value batch = blockIdY(b);
  Value inside = cmp(b, P::ult, row, rows);
  Value at = arith::MinUIOp::create(
      b, row,
      arith::SubIOp::create(b,
                            arith::MaxUIOp::create(b, rows, indexConst(b, 1)),
                            indexConst(b, 1)));
  Value head = arith::DivUIOp::create(b, at, numQueries);
  Value query = arith::RemUIOp::create(b, at, numQueries);
  // The quarter [dv / 4 q, dv / 4 (q + 1)) of the row, dv / 4 elements
  // (aligned to their bytes up to 16 when dv is a multiple of 4); else a
  // lane's elements one at a time.
  Value sum = f32Const(b, 0.0f);
  if (dv % 4 == 0) {
    const int64_t n = dv / 4, bytes = n * 2;
    const int64_t align = std::min<int64_t>(16, bytes & -bytes);
    auto wide = VectorType::get({n}, f32);
    SmallVector<Value> idx{batch, head, query,
                           arith::MulIOp::create(b, quarter, indexConst(b, n))};
    auto load = [&](Value src) -> Value {
      return arith::ExtFOp::create(
          b, wide,
          vector::LoadOp::create(b, VectorType::get({n}, elem), src,
                                 ValueRange(idx), false,
                                 llvm::MaybeAlign(align))
              .getResult());
    };
    sum = vector::ReductionOp::create(
        b, vector::CombiningKind::ADD,
        arith::MulFOp::create(b, load(gradOut), load(out)));
  } else {
    for (int64_t c = 0; c < dv; ++c) {
      // Element c belongs to quarter c mod 4.
      Value mine = cmp(b, P::eq, quarter, indexConst(b, c % 4));
      auto elemAt = [&](Value src) -> Value {
        return arith::ExtFOp::create(
            b, f32,
            memref::LoadOp::create(
                b, src, ValueRange{batch, head, query, indexConst(b, c)})
                .getResult());
      };
      Value product = arith::MulFOp::create(b, elemAt(gradOut), elemAt(out));
      sum = arith::SelectOp::create(
          b, mine, arith::AddFOp::create(b, sum, product), sum);
    }
  }
  for (int64_t offset : {1, 2})
    sum = arith::AddFOp::create(b, sum, shuffleXor(b, sum, offset));
  buildIfThen(b,
              arith::AndIOp::create(b, inside,
                                    cmp(b, P::eq, quarter, indexConst(b, 0))),
              [&](ImplicitLocOpBuilder &wb) {
                memref::StoreOp::create(wb, sum, delta,
                                        ValueRange{batch, head, query});
              });
  gpu::ReturnOp::create(b);
  return kernel;
}

struct GradDeltaToGPU : KernelOpPattern<SparseAttentionGradDeltaKernelOp> {
  using KernelOpPattern::KernelOpPattern;

  void lower(SparseAttentionGradDeltaKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    SmallVector<KernelOperand> operands{{"output", op.getOutput()},
                                        {"gradOutput", op.getGradOutput()},
                                        {"delta", op.getDelta()}};
    Kernel kernel = buildDeltaKernel(rewriter, op, operands);
    KernelConfigAttr config = getKernelConfig(op);
    Value rows = arith::MulIOp::create(host, dimOf(host, op.getOutput(), 1),
                                       dimOf(host, op.getOutput(), 2));
    launch(host, kernel,
           host.createOrFold<arith::CeilDivUIOp>(
               rows, indexConst(host, kDeltaRowsPerBlock)),
           dimOf(host, op.getOutput(), 0), config.getThreads(), operands);
  }
};

struct GradQueriesFromScoresToGPU
    : KernelOpPattern<SparseAttentionGradQueriesFromScoresKernelOp> {
  using KernelOpPattern::KernelOpPattern;

  void lower(SparseAttentionGradQueriesFromScoresKernelOp op,
             PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    MemRefType qType = bufferType(op.getQueries());
    const int64_t kvHeads = bufferType(op.getKeys()).getShape()[1];
    const int64_t G = qType.getShape()[1] / kvHeads;
    const int64_t d = qType.getShape()[3];
    const int64_t topK = bufferType(op.getSelection()).getShape()[3];
    const int64_t c = op.getBlockSize();
    const ScoresGradPlan plan(d, c, topK);
    KernelConfigAttr config = getKernelConfig(op);
    SmallVector<KernelOperand> operands{
        {"queries", op.getQueries()},     {"keys", op.getKeys()},
        {"selection", op.getSelection()}, {"queryOffset", op.getQueryOffset()},
        {"scores", op.getScores()},       {"gradQueries", op.getGradQueries()}};
    Kernel kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      kernel = createKernelFor(
          rewriter, op, "sparse_attention_grad_queries_from_scores", operands);
      applyOccupancyHint(kernel.func(), config);
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      ScoresGradKernel(b, kernel, plan, G, d, c, topK, kvHeads,
                       op.getScale().convertToFloat(),
                       config.getPrefetchAhead().value_or(0) > 0)
          .build(b);
    }
    Value groups = arith::MulIOp::create(host, dimOf(host, op.getQueries(), 0),
                                         indexConst(host, kvHeads));
    launch(host, kernel,
           host.createOrFold<arith::CeilDivUIOp>(
               dimOf(host, op.getQueries(), 2),
               indexConst(host, kRegisterGradQueries)),
           groups, config.getThreads(), operands, plan.bytes);
  }
};

} // namespace

bool mlir::pisa::detail::gradFromScoresFits(Type elem, int64_t G, int64_t d,
                                            int64_t dv, int64_t c) {
  return keyGradientsInRegisters(elem, d, dv, c) && G <= kMmaRows &&
         d % kMmaK == 0 && d <= 128;
}

void mlir::pisa::detail::populateAttentionGradScoresPatterns(
    RewritePatternSet &patterns) {
  patterns.add<GradDeltaToGPU, GradQueriesFromScoresToGPU>(
      patterns.getContext());
}
