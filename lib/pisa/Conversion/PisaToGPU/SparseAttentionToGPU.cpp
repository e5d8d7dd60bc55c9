//===- SparseAttentionToGPU.cpp - Attention over the selected blocks ------===//
//
// pisa.kernel.sparse_attention: one block of four warps per (query, batch x
// KV head). The query's G head rows are staged once; for each selection
// entry used (docs/semantics.md, section 6) whose block starts at or before
// the query, the block's keys and values are staged and
//
//   S = Q K^T        vector.contract (R x d) x (C/4 x d)^T per warp
//   softmax          online, per row, in registers (base 2, scale folded)
//   O = O * alpha + P V   vector.contract (R x C) x (C x dv/4), the f32
//                         accumulator read from and written to shared memory
//
// both products on tensor cores through --pisa-vector-to-mma-sync, f32
// accumulation. P is rounded to the element type before the value product,
// as FlashAttention does. At the end each row is divided by its sum and
// written in the element type, with lse = ln 2 * (max + log2 sum).
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "QueryKernels.h"
#include "SparseAttention.h"

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

namespace {
constexpr int64_t kChunk = 8; // 16-bit elements per 16-byte copy

int64_t roundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }
} // namespace

AttentionTiles::AttentionTiles(int64_t groupSize, int64_t d, int64_t dv,
                               int64_t c)
    : headDim(d), valueDim(dv), blockSize(c) {
  rows = groupSize <= 16 ? 16 : groupSize <= 32 ? 32 : 64;
  queryStride = d + 8;
  keyStride = d + 8;
  valueStride = dv + 8;
  scoreStride = c + 4;
  probStride = c + 8;
  outStride = dv + 4;
  int64_t at = 0;
  auto place = [&](int64_t bytes) {
    int64_t offset = at;
    at += roundUp(bytes, 16);
    return offset;
  };
  queryOffset = place(rows * queryStride * 2);
  keyOffset = place(c * keyStride * 2);
  valueOffset = place(c * valueStride * 2);
  scoreOffset = place(rows * scoreStride * 4);
  probOffset = place(rows * probStride * 2);
  outOffset = place(rows * outStride * 4);
  bytes = at;
  threadsPerRow = kAttentionThreads / rows;
  scoreColumns = c / threadsPerRow;
  outColumns = dv / threadsPerRow;
}

std::optional<std::string>
mlir::pisa::detail::attentionLimitViolation(Type elem, int64_t groupSize,
                                            int64_t d, int64_t dv, int64_t c) {
  std::string why;
  llvm::raw_string_ostream os(why);
  if (!elem.isF16() && !elem.isBF16())
    os << "has " << elem
       << " inputs: the GPU kernel takes f16 or bf16 (tensor cores; tf32 "
          "would round f32 inputs), pisa-cpu-pipeline lowers f32";
  else if (c % 32 != 0 || c > kMaxAttentionBlockSize)
    os << "has block size C = " << c
       << ": the GPU kernel takes a multiple of 32 up to "
       << kMaxAttentionBlockSize << " (four warps split a block's keys)";
  else if (d % 16 != 0 || d > kMaxAttentionHeadDim)
    os << "has head dim d = " << d
       << ": the GPU kernel takes a multiple of 16 up to "
       << kMaxAttentionHeadDim << " (tensor-core k-steps)";
  else if (dv % 32 != 0 || dv > kMaxAttentionHeadDim)
    os << "has value dim dv = " << dv
       << ": the GPU kernel takes a multiple of 32 up to "
       << kMaxAttentionHeadDim << " (four warps split dv)";
  else if (groupSize > kMaxAttentionGroupSize)
    os << "has G = " << groupSize << " query heads per KV head, above the "
       << "GPU limit of " << kMaxAttentionGroupSize
       << " (a block's score rows)";
  else if (AttentionTiles t(groupSize, d, dv, c);
           t.bytes > kMaxAttentionSharedBytes)
    os << "needs " << t.bytes << " bytes of shared memory per block, above "
       << "the " << kMaxAttentionSharedBytes << " an sm_90 block may use";
  else
    return std::nullopt;
  return why;
}

namespace {

Value splatF32(ImplicitLocOpBuilder &b, VectorType type, float v) {
  return arith::ConstantOp::create(
      b, type, DenseElementsAttr::get(type, b.getF32FloatAttr(v)));
}

/// max or sum of `v` over the `width` consecutive lanes that share a row.
Value rowAllReduce(ImplicitLocOpBuilder &b, Value v, int64_t width,
                   bool isMax) {
  for (int64_t mask = 1; mask < width; mask *= 2) {
    Value other = shuffleXor(b, v, mask);
    v = isMax ? arith::MaximumFOp::create(b, v, other).getResult()
              : arith::AddFOp::create(b, v, other).getResult();
  }
  return v;
}

/// `vector.contract` (m, k) x rhs -> (m, n) accumulated onto `acc`; rhs is
/// (n, k) for the score product and (k, n) for the value product.
Value tileProduct(ImplicitLocOpBuilder &b, Value lhs, Value rhs, Value acc,
                  bool rhsIsKN) {
  AffineExpr m, n, k;
  bindDims(b.getContext(), m, n, k);
  return vector::ContractionOp::create(
      b, lhs, rhs, acc,
      ArrayRef<ArrayRef<AffineExpr>>{
          {m, k},
          rhsIsKN ? ArrayRef<AffineExpr>{k, n} : ArrayRef<AffineExpr>{n, k},
          {m, n}},
      ArrayRef<vector::IteratorType>{vector::IteratorType::parallel,
                                     vector::IteratorType::parallel,
                                     vector::IteratorType::reduction});
}

struct SparseAttentionToGPU : KernelOpPattern<SparseAttentionKernelOp> {
  using KernelOpPattern::KernelOpPattern;

  void lower(SparseAttentionKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    MemRefType qType = bufferType(op.getQueries());
    const int64_t kvHeads = bufferType(op.getKeys()).getShape()[1];
    const int64_t G = qType.getShape()[1] / kvHeads;
    const int64_t d = qType.getShape()[3];
    const int64_t dv = bufferType(op.getValues()).getShape()[3];
    const int64_t c = op.getBlockSize();
    const AttentionTiles tiles(G, d, dv, c);
    Kernel kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      kernel = createKernel(
          rewriter, op, "sparse_attention",
          {{"queries", qType},
           {"keys", bufferType(op.getKeys())},
           {"values", bufferType(op.getValues())},
           {"selection", bufferType(op.getSelection())},
           {"queryOffset", rewriter.getIndexType()},
           {"output", bufferType(op.getOutput())},
           {"lse", bufferType(op.getLse())}});
      // Blocks per SM as shared memory allows, so that ptxas keeps
      // registers within that occupancy.
      setOccupancyHint(kernel.func(), kAttentionThreads,
                       std::clamp<int64_t>((228 * 1024) / (tiles.bytes + 1024),
                                           1, 16));
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      buildBody(b, kernel, tiles, G, kvHeads,
                op.getScale().convertToFloat());
    }
    Value numQueries = dimOf(host, op.getQueries(), 2);
    Value groups = arith::MulIOp::create(
        host, dimOf(host, op.getQueries(), 0), indexConst(host, kvHeads));
    launch(host, kernel, numQueries, groups, kAttentionThreads,
           {{"queries", op.getQueries()},
            {"keys", op.getKeys()},
            {"values", op.getValues()},
            {"selection", op.getSelection()},
            {"queryOffset", op.getQueryOffset()},
            {"output", op.getOutput()},
            {"lse", op.getLse()}},
           tiles.bytes);
  }

  static void buildBody(ImplicitLocOpBuilder &b, const Kernel &e,
                        const AttentionTiles &t, int64_t G, int64_t kvHeads,
                        float scale) {
    using P = arith::CmpIPredicate;
    MLIRContext *ctx = b.getContext();
    Type f32 = b.getF32Type();
    Type elem = cast<MemRefType>(e.arg("queries").getType()).getElementType();
    const int64_t d = t.headDim, c = t.blockSize, R = t.rows;
    const float negInf = -std::numeric_limits<float>::infinity();

    Value bytes = gpu::DynamicSharedMemoryOp::create(
        b, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                           MemRefLayoutAttrInterface(),
                           gpu::AddressSpaceAttr::get(
                               ctx, gpu::GPUDialect::getWorkgroupAddressSpace())));
    auto view = [&](int64_t offset, ArrayRef<int64_t> shape, Type type) {
      return memref::ViewOp::create(b, workgroupType(ctx, shape, type), bytes,
                                    indexConst(b, offset), ValueRange{})
          .getResult();
    };
    Value qTile = view(t.queryOffset, {R, t.queryStride}, elem);
    Value kTile = view(t.keyOffset, {c, t.keyStride}, elem);
    Value vTile = view(t.valueOffset, {c, t.valueStride}, elem);
    Value sTile = view(t.scoreOffset, {R, t.scoreStride}, f32);
    Value pTile = view(t.probOffset, {R, t.probStride}, elem);
    Value oTile = view(t.outOffset, {R, t.outStride}, f32);

    Value zero = indexConst(b, 0);
    Value query = blockIdX(b);
    Value batch = arith::DivUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
    Value kv = arith::RemUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
    Value tid = threadIdX(b);
    Value warp = arith::DivUIOp::create(b, tid, indexConst(b, 32));
    Value firstHead = arith::MulIOp::create(b, kv, indexConst(b, G));
    Value numKeys = dimOf(b, e.arg("keys"), 2);
    Value position = arith::AddIOp::create(b, e.arg("queryOffset"), query);
    // Keys past the query or past N are never attended.
    Value keyEnd = arith::MinUIOp::create(
        b, numKeys, arith::AddIOp::create(b, position, indexConst(b, 1)));
    Value numBlocks =
        arith::CeilDivUIOp::create(b, numKeys, indexConst(b, c));
    auto chunk = VectorType::get({kChunk}, elem);
    Value zeroChunk = arith::ConstantOp::create(
        b, chunk, DenseElementsAttr::get(chunk, b.getZeroAttr(elem)));

    // Stage the query's head rows (rows past G are zeros).
    const int64_t qChunks = d / kChunk;
    copyChunks(
        b, tid, R * qChunks, kAttentionThreads,
        [&](ImplicitLocOpBuilder &lb, Value i) -> Value {
          Value r = arith::DivUIOp::create(lb, i, indexConst(lb, qChunks));
          Value col = arith::MulIOp::create(
              lb, arith::RemUIOp::create(lb, i, indexConst(lb, qChunks)),
              indexConst(lb, kChunk));
          Value head = arith::AddIOp::create(
              lb, firstHead,
              arith::MinUIOp::create(lb, r, indexConst(lb, G - 1)));
          Value v = vector::LoadOp::create(
              lb, chunk, e.arg("queries"), ValueRange{batch, head, query, col},
              false, llvm::MaybeAlign(16));
          return arith::SelectOp::create(
              lb, cmp(lb, P::ult, r, indexConst(lb, G)), v, zeroChunk);
        },
        [&](ImplicitLocOpBuilder &lb, Value i, Value v) {
          Value r = arith::DivUIOp::create(lb, i, indexConst(lb, qChunks));
          Value col = arith::MulIOp::create(
              lb, arith::RemUIOp::create(lb, i, indexConst(lb, qChunks)),
              indexConst(lb, kChunk));
          vector::StoreOp::create(lb, v, qTile, ValueRange{r, col}, false,
                                  llvm::MaybeAlign(16));
        });

    // Softmax coordinates: row r, columns [part * n, part * n + n).
    Value row = arith::DivUIOp::create(b, tid, indexConst(b, t.threadsPerRow));
    Value part = arith::RemUIOp::create(b, tid, indexConst(b, t.threadsPerRow));
    Value scoreCol0 =
        arith::MulIOp::create(b, part, indexConst(b, t.scoreColumns));
    Value outCol0 = arith::MulIOp::create(b, part, indexConst(b, t.outColumns));
    auto outRow = VectorType::get({t.outColumns}, f32);
    vector::StoreOp::create(b, splatF32(b, outRow, 0.0f), oTile,
                            ValueRange{row, outCol0}, false,
                            llvm::MaybeAlign(16));

    // Entries in order; one used when 0 <= s < ceil(N / C) and s > the last
    // used (the selection row is the same for the whole block, so control
    // flow stays uniform and the barriers inside are reached by all).
    const int64_t topK =
        cast<MemRefType>(e.arg("selection").getType()).getShape()[3];
    Value noBlock = indexConst(b, -1);
    SmallVector<Value> state = buildLoop(
        b, zero, indexConst(b, topK),
        ValueRange{noBlock, f32Const(b, negInf), f32Const(b, 0.0f)},
        [&](ImplicitLocOpBuilder &lb, Value entry,
            ValueRange st) -> SmallVector<Value> {
          Value last = st[0], max = st[1], sum = st[2];
          Value s = toIndex(lb, memref::LoadOp::create(
                                    lb, e.arg("selection"),
                                    ValueRange{batch, kv, query, entry}));
          Value used = arith::AndIOp::create(
              lb,
              arith::AndIOp::create(lb, cmp(lb, P::sge, s, zero),
                                    cmp(lb, P::slt, s, numBlocks)),
              cmp(lb, P::sgt, s, last));
          Value firstKey = arith::MulIOp::create(lb, s, indexConst(lb, c));
          Value attends = arith::AndIOp::create(
              lb, used, cmp(lb, P::slt, firstKey, keyEnd));
          SmallVector<Value> next = buildIf(
              lb, attends, TypeRange{f32, f32},
              [&](ImplicitLocOpBuilder &ib) -> SmallVector<Value> {
                return attendBlock(ib, e, t, batch, kv, firstKey, keyEnd,
                                   numKeys, tid, warp, row, part, scoreCol0,
                                   outCol0, qTile, kTile, vTile, sTile, pTile,
                                   oTile, max, sum, scale);
              },
              [&](ImplicitLocOpBuilder &) -> SmallVector<Value> {
                return {max, sum};
              });
          Value nextLast = arith::SelectOp::create(lb, used, s, last);
          return {nextLast, next[0], next[1]};
        });
    Value max = state[1], sum = state[2];
    gpu::BarrierOp::create(b); // the last value product is in O

    // Row r < G is head firstHead + r: o = O / sum (0 without keys), lse =
    // ln 2 * (max + log2 sum) (-inf without keys).
    Value empty = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, sum,
                                        f32Const(b, 0.0f));
    Value inverse = arith::SelectOp::create(
        b, empty, f32Const(b, 0.0f),
        arith::DivFOp::create(b, f32Const(b, 1.0f), sum));
    Value lse = arith::SelectOp::create(
        b, empty, f32Const(b, negInf),
        arith::MulFOp::create(
            b, arith::AddFOp::create(b, max, math::Log2Op::create(b, sum)),
            f32Const(b, kLn2)));
    buildIfThen(b, cmp(b, P::ult, row, indexConst(b, G)),
                [&](ImplicitLocOpBuilder &wb) {
      Value head = arith::AddIOp::create(wb, firstHead, row);
      Value acc = vector::LoadOp::create(wb, outRow, oTile,
                                         ValueRange{row, outCol0}, false,
                                         llvm::MaybeAlign(16));
      Value scaled = arith::MulFOp::create(
          wb, acc, vector::BroadcastOp::create(wb, outRow, inverse));
      Value out = scaled;
      if (!elem.isF32())
        out = arith::TruncFOp::create(
            wb, VectorType::get({t.outColumns}, elem), scaled);
      vector::StoreOp::create(
          wb, out, e.arg("output"), ValueRange{batch, head, query, outCol0},
          false, llvm::MaybeAlign(std::min<int64_t>(16, t.outColumns * 2)));
      buildIfThen(wb, cmp(wb, P::eq, part, indexConst(wb, 0)),
                  [&](ImplicitLocOpBuilder &lb) {
                    memref::StoreOp::create(lb, lse, e.arg("lse"),
                                            ValueRange{batch, head, query});
                  });
    });
    gpu::ReturnOp::create(b);
  }

  /// One used block starting at key `firstKey` <= the query's position:
  /// stage its keys and values, score, update the row's online softmax and
  /// accumulate P V into O. Returns the row's new (max, sum), base 2.
  static SmallVector<Value>
  attendBlock(ImplicitLocOpBuilder &b, const Kernel &e, const AttentionTiles &t,
              Value batch, Value kv, Value firstKey, Value keyEnd,
              Value numKeys, Value tid, Value warp, Value row, Value part,
              Value scoreCol0, Value outCol0, Value qTile, Value kTile,
              Value vTile, Value sTile, Value pTile, Value oTile, Value max,
              Value sum, float scale) {
    using P = arith::CmpIPredicate;
    Type f32 = b.getF32Type();
    Type elem = cast<MemRefType>(e.arg("queries").getType()).getElementType();
    const int64_t d = t.headDim, dv = t.valueDim, c = t.blockSize;
    const int64_t R = t.rows;
    const float negInf = -std::numeric_limits<float>::infinity();
    Value zero = indexConst(b, 0);
    auto chunk = VectorType::get({kChunk}, elem);
    Value zeroChunk = arith::ConstantOp::create(
        b, chunk, DenseElementsAttr::get(chunk, b.getZeroAttr(elem)));
    Value lastKey = arith::SubIOp::create(b, numKeys, indexConst(b, 1));

    // The previous block's reads of K, V and P are done.
    gpu::BarrierOp::create(b);
    // Stage keys and values; rows past N are zeros (a zero probability
    // times a garbage value could be NaN).
    auto stage = [&](StringRef name, Value tile, int64_t width) {
      const int64_t perRow = width / kChunk;
      auto at = [&](ImplicitLocOpBuilder &lb, Value i) {
        Value r = arith::DivUIOp::create(lb, i, indexConst(lb, perRow));
        Value col = arith::MulIOp::create(
            lb, arith::RemUIOp::create(lb, i, indexConst(lb, perRow)),
            indexConst(lb, kChunk));
        return std::make_pair(r, col);
      };
      copyChunks(
          b, tid, c * perRow, kAttentionThreads,
          [&](ImplicitLocOpBuilder &lb, Value i) -> Value {
            auto [r, col] = at(lb, i);
            Value key = arith::AddIOp::create(lb, firstKey, r);
            Value v = vector::LoadOp::create(
                lb, chunk, e.arg(name),
                ValueRange{batch, kv, arith::MinUIOp::create(lb, key, lastKey),
                           col},
                false, llvm::MaybeAlign(16));
            return arith::SelectOp::create(lb, cmp(lb, P::ult, key, numKeys),
                                           v, zeroChunk);
          },
          [&](ImplicitLocOpBuilder &lb, Value i, Value v) {
            auto [r, col] = at(lb, i);
            vector::StoreOp::create(lb, v, tile, ValueRange{r, col}, false,
                                    llvm::MaybeAlign(16));
          });
    };
    stage("keys", kTile, d);
    stage("values", vTile, dv);
    gpu::BarrierOp::create(b);

    // S = Q K^T: warp w scores the block's keys [w C/4, (w + 1) C/4).
    Value pad = arith::ConstantOp::create(b, b.getZeroAttr(elem));
    SmallVector<bool> inBounds(2, true);
    const int64_t keysPerWarp = c / kAttentionWarps;
    Value warpKey0 = arith::MulIOp::create(b, warp, indexConst(b, keysPerWarp));
    {
      Value lhs = vector::TransferReadOp::create(
          b, VectorType::get({R, d}, elem), qTile, ValueRange{zero, zero}, pad,
          inBounds);
      Value rhs = vector::TransferReadOp::create(
          b, VectorType::get({keysPerWarp, d}, elem), kTile,
          ValueRange{warpKey0, zero}, pad, inBounds);
      auto accType = VectorType::get({R, keysPerWarp}, f32);
      Value product = tileProduct(b, lhs, rhs, splatF32(b, accType, 0.0f),
                                  /*rhsIsKN=*/false);
      vector::TransferWriteOp::create(b, product, sTile,
                                      ValueRange{zero, warpKey0}, inBounds);
    }
    gpu::BarrierOp::create(b);

    // The row's online softmax over its visible keys (base 2, the scale
    // folded into one multiply); P = exp2(logit - new max) and the row of O
    // rescaled by exp2(old max - new max).
    auto i32s = VectorType::get({t.scoreColumns}, b.getI32Type());
    Value raw = vector::LoadOp::create(
        b, VectorType::get({t.scoreColumns}, f32), sTile,
        ValueRange{row, scoreCol0}, false, llvm::MaybeAlign(16));
    Value visible = arith::SubIOp::create(
        b, arith::SubIOp::create(b, keyEnd, firstKey), scoreCol0);
    visible = arith::MinSIOp::create(
        b, visible, indexConst(b, t.scoreColumns)); // fits i32
    Value mask = cmp(b, P::slt, iotaI32(b, t.scoreColumns),
                     vector::BroadcastOp::create(b, i32s, toI32(b, visible)));
    auto scoreRow = VectorType::get({t.scoreColumns}, f32);
    Value logits = arith::SelectOp::create(
        b, mask,
        arith::MulFOp::create(b, raw, splatF32(b, scoreRow, scale * kLog2E)),
        splatF32(b, scoreRow, negInf));
    auto reassoc = arith::FastMathFlags::reassoc;
    Value blockMax = rowAllReduce(
        b,
        vector::ReductionOp::create(b, vector::CombiningKind::MAXIMUMF, logits,
                                    reassoc),
        t.threadsPerRow, /*isMax=*/true);
    Value newMax = arith::MaximumFOp::create(b, max, blockMax);
    // A row that has seen no key yet keeps max = -inf: shift by 0 there.
    Value shift = arith::SelectOp::create(
        b,
        arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, newMax,
                              f32Const(b, negInf)),
        f32Const(b, 0.0f), newMax);
    Value probs = math::Exp2Op::create(
        b, arith::SubFOp::create(
               b, logits, vector::BroadcastOp::create(b, scoreRow, shift)));
    Value blockSum = rowAllReduce(
        b,
        vector::ReductionOp::create(b, vector::CombiningKind::ADD, probs,
                                    reassoc),
        t.threadsPerRow, /*isMax=*/false);
    Value alpha =
        math::Exp2Op::create(b, arith::SubFOp::create(b, max, shift));
    Value newSum = arith::AddFOp::create(
        b, arith::MulFOp::create(b, sum, alpha), blockSum);
    vector::StoreOp::create(
        b,
        arith::TruncFOp::create(b, VectorType::get({t.scoreColumns}, elem),
                                probs),
        pTile, ValueRange{row, scoreCol0}, false,
        llvm::MaybeAlign(std::min<int64_t>(16, t.scoreColumns * 2)));
    auto outRow = VectorType::get({t.outColumns}, f32);
    Value acc = vector::LoadOp::create(b, outRow, oTile,
                                       ValueRange{row, outCol0}, false,
                                       llvm::MaybeAlign(16));
    vector::StoreOp::create(
        b,
        arith::MulFOp::create(b, acc,
                              vector::BroadcastOp::create(b, outRow, alpha)),
        oTile, ValueRange{row, outCol0}, false, llvm::MaybeAlign(16));
    gpu::BarrierOp::create(b);

    // O += P V: warp w owns the columns [w dv/4, (w + 1) dv/4).
    const int64_t colsPerWarp = dv / kAttentionWarps;
    Value warpCol0 = arith::MulIOp::create(b, warp, indexConst(b, colsPerWarp));
    {
      Value lhs = vector::TransferReadOp::create(
          b, VectorType::get({R, c}, elem), pTile, ValueRange{zero, zero}, pad,
          inBounds);
      Value rhs = vector::TransferReadOp::create(
          b, VectorType::get({c, colsPerWarp}, elem), vTile,
          ValueRange{zero, warpCol0}, pad, inBounds);
      Value accTile = vector::TransferReadOp::create(
          b, VectorType::get({R, colsPerWarp}, f32), oTile,
          ValueRange{zero, warpCol0}, arith::ConstantOp::create(
                                          b, b.getZeroAttr(f32)),
          inBounds);
      Value product = tileProduct(b, lhs, rhs, accTile, /*rhsIsKN=*/true);
      vector::TransferWriteOp::create(b, product, oTile,
                                      ValueRange{zero, warpCol0}, inBounds);
    }
    return {newMax, newSum};
  }
};

} // namespace

void mlir::pisa::populateAttentionKernelToGPUPatterns(
    RewritePatternSet &patterns) {
  patterns.add<SparseAttentionToGPU>(patterns.getContext());
}
