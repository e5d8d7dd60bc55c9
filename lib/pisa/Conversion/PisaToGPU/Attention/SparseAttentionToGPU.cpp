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

#include "Attention/AttentionGrad.h"
#include "Attention/AttentionSteps.h"
#include "Attention/QueryTiles.h"
#include "Attention/SparseAttention.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/TileCopy.h"
#include "Selection/LaneWalk.h"
#include "Selection/PackedSequences.h"
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

namespace {} // namespace

AttentionTiles::AttentionTiles(int64_t groupSize, int64_t d, int64_t dv,
                               int64_t c, int64_t topK)
    : headDim(d), valueDim(dv), blockSize(c), topK(topK) {
  rows = groupSize <= 16 ? 16 : groupSize <= 32 ? 32 : 64;
  queryStride = d + 8;
  keyStride = d + 8;
  valueStride = dv + 8;
  scoreStride = c + 4;
  probStride = c + 8;
  outStride = dv + 4;
  int64_t at = 0;
  auto place = [&](int64_t bytes) { return SharedTiles::place(at, bytes); };
  queryOffset = place(rows * queryStride * 2);
  keyOffset = place(c * keyStride * 2);
  valueOffset = place(c * valueStride * 2);
  scoreOffset = place(rows * scoreStride * 4);
  probOffset = place(rows * probStride * 2);
  outOffset = place(rows * outStride * 4);
  listOffset = place(topK * 4);
  bytes = at;
  threadsPerRow = kAttentionThreads / rows;
  scoreColumns = c / threadsPerRow;
  outColumns = dv / threadsPerRow;
}

std::optional<std::string> mlir::pisa::detail::attentionTileViolation(
    const AttentionKernelRules &rules, Type elem, int64_t groupSize, int64_t d,
    int64_t dv, int64_t c, int64_t topK, bool takesBlockOf16) {
  std::string why;
  llvm::raw_string_ostream os(why);
  const StringRef who = rules.who;
  if (!elem.isF16() && !elem.isBF16())
    os << "has " << elem << " inputs: " << who << " takes f16 or bf16 ("
       << rules.elementReason << "), pisa-cpu-pipeline lowers f32";
  else if ((c < 32 || c % 32 != 0 || c > kMaxAttentionBlockSize) &&
           !(c == 16 && takesBlockOf16))
    os << "has block size C = " << c << ": " << who
       << " takes a multiple of 32 up to " << kMaxAttentionBlockSize
       << " (four warps split a block's keys), or 16 where "
       << rules.blockOf16Needs;
  else if (d < rules.headDimStep || d % rules.headDimStep != 0 ||
           d > kMaxAttentionHeadDim)
    os << "has head dim d = " << d << ": " << who << " takes a multiple of "
       << rules.headDimStep << " from " << rules.headDimStep << " to "
       << kMaxAttentionHeadDim << " (" << rules.headDimReason << ")";
  else if (dv < 32 || dv % 32 != 0 || dv > kMaxAttentionHeadDim)
    os << "has value dim dv = " << dv << ": " << who
       << " takes a multiple of 32 from 32 to " << kMaxAttentionHeadDim
       << " (four warps split dv)";
  else if (topK > kMaxAttentionTopK)
    os << "selects K = " << topK << " blocks per query, above the GPU "
       << "limit of " << kMaxAttentionTopK << " (the block list in shared "
       << "memory)";
  else if (groupSize > kMaxAttentionGroupSize)
    os << "has G = " << groupSize << " query heads per KV head, above the "
       << "GPU limit of " << kMaxAttentionGroupSize
       << " (a block's score rows)";
  else
    return std::nullopt;
  return why;
}

std::optional<std::string>
mlir::pisa::detail::attentionLimitViolation(Type elem, int64_t groupSize,
                                            int64_t d, int64_t dv, int64_t c,
                                            int64_t topK) {
  static const AttentionKernelRules forward{
      "the GPU kernel", "tensor cores; tf32 would round f32 inputs", 16,
      "tensor-core k-steps",
      "the register kernel takes the sizes (G <= 16, d a multiple of 32 up "
      "to 128, dv of 8 up to 128)"};
  if (std::optional<std::string> why = attentionTileViolation(
          forward, elem, groupSize, d, dv, c, topK,
          attendsInRegisters(elem, groupSize, d, dv, 16)))
    return why;
  AttentionTiles t(groupSize, d, dv, c, topK);
  if (t.bytes <= kMaxAttentionSharedBytes)
    return std::nullopt;
  std::string why;
  llvm::raw_string_ostream(why)
      << "needs " << t.bytes << " bytes of shared memory per block, above "
      << "the " << kMaxAttentionSharedBytes << " an sm_90 block may use";
  return why;
}

namespace {
// The two halves of the selection rule (docs/semantics.md, section 6) both
// walks state: entry s names a block of the sequence, and its block starts
// before keyEnd.
Value isBlockOfSequence(ImplicitLocOpBuilder &b, Value s, Value numBlocks) {
  return arith::AndIOp::create(
      b, cmp(b, arith::CmpIPredicate::sge, s, indexConst(b, 0)),
      cmp(b, arith::CmpIPredicate::slt, s, numBlocks));
}
Value startsBefore(ImplicitLocOpBuilder &b, Value s, int64_t blockSize,
                   Value keyEnd) {
  return cmp(b, arith::CmpIPredicate::slt,
             arith::MulIOp::create(b, s, indexConst(b, blockSize)), keyEnd);
}
} // namespace

Value mlir::pisa::detail::walkAttendedBlocks(
    ImplicitLocOpBuilder &b, Value selection, ValueRange row, Value numKeys,
    Value keyEnd, int64_t blockSize, int64_t topK,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value, Value)>
        onEntry) {
  using P = arith::CmpIPredicate;
  Value zero = indexConst(b, 0), one = indexConst(b, 1);
  Value numBlocks =
      arith::CeilDivUIOp::create(b, numKeys, indexConst(b, blockSize));
  SmallVector<Value> walked = buildLoop(
      b, zero, indexConst(b, topK), ValueRange{indexConst(b, -1), zero},
      [&](ImplicitLocOpBuilder &lb, Value entry,
          ValueRange st) -> SmallVector<Value> {
        Value last = st[0], count = st[1];
        Value s32 = memref::LoadOp::create(
            lb, selection, ValueRange{row[0], row[1], row[2], entry});
        Value s = toIndex(lb, s32);
        Value used = arith::AndIOp::create(
            lb, isBlockOfSequence(lb, s, numBlocks), cmp(lb, P::sgt, s, last));
        Value attended = arith::AndIOp::create(
            lb, used, startsBefore(lb, s, blockSize, keyEnd));
        onEntry(lb, attended, s32, count);
        return {arith::SelectOp::create(lb, used, s, last),
                arith::SelectOp::create(lb, attended,
                                        arith::AddIOp::create(lb, count, one),
                                        count)};
      });
  return walked[1];
}

Value mlir::pisa::detail::walkAttendedBlocksByWarp(
    ImplicitLocOpBuilder &b, Value selection, ValueRange row, Value numKeys,
    Value keyEnd, int64_t blockSize, int64_t topK, Value lane,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> onEntry) {
  using P = arith::CmpIPredicate;
  auto i32Const = [](ImplicitLocOpBuilder &cb, int64_t v) -> Value {
    return arith::ConstantIntOp::create(cb, v, 32);
  };
  auto shuffle = [&](ImplicitLocOpBuilder &cb, Value v, int64_t at,
                     gpu::ShuffleMode mode) -> Value {
    return gpu::ShuffleOp::create(cb, v, i32Const(cb, at), i32Const(cb, kLanes),
                                  mode)
        .getShuffleResult();
  };
  Value numBlocks =
      arith::CeilDivUIOp::create(b, numKeys, indexConst(b, blockSize));
  Value lane32 = toI32(b, lane);
  // Chunks of 32 entries, lane l taking entry 32 c + l; the state: the
  // count so far and the largest valid entry of the chunks before.
  SmallVector<Value> state = buildLoop(
      b, indexConst(b, 0), indexConst(b, llvm::divideCeil(topK, kLanes)),
      indexConst(b, 1), ValueRange{indexConst(b, 0), i32Const(b, -1)},
      [&](ImplicitLocOpBuilder &lb, Value chunk,
          ValueRange st) -> SmallVector<Value> {
        Value count = st[0], last = st[1];
        Value entry = arith::AddIOp::create(
            lb, arith::MulIOp::create(lb, chunk, indexConst(lb, kLanes)), lane);
        Value s32 = memref::LoadOp::create(
            lb, selection,
            ValueRange{
                row[0], row[1], row[2],
                arith::MinUIOp::create(lb, entry, indexConst(lb, topK - 1))});
        Value s = toIndex(lb, s32);
        Value valid = arith::AndIOp::create(
            lb, cmp(lb, P::ult, entry, indexConst(lb, topK)),
            isBlockOfSequence(lb, s, numBlocks));
        // The largest valid entry up to this lane (an inclusive prefix max),
        // and before it.
        Value upTo = arith::SelectOp::create(lb, valid, s32, i32Const(lb, -1));
        for (int64_t k = 1; k < kLanes; k *= 2)
          upTo = arith::SelectOp::create(
              lb, arith::CmpIOp::create(lb, P::sge, lane32, i32Const(lb, k)),
              arith::MaxSIOp::create(
                  lb, upTo, shuffle(lb, upTo, k, gpu::ShuffleMode::UP)),
              upTo);
        Value before = arith::MaxSIOp::create(
            lb, last,
            arith::SelectOp::create(
                lb, arith::CmpIOp::create(lb, P::sge, lane32, i32Const(lb, 1)),
                shuffle(lb, upTo, 1, gpu::ShuffleMode::UP), i32Const(lb, -1)));
        Value used = arith::AndIOp::create(
            lb, valid, arith::CmpIOp::create(lb, P::sgt, s32, before));
        Value attended = arith::AndIOp::create(
            lb, used, startsBefore(lb, s, blockSize, keyEnd));
        Value mask = ballot(lb, attended);
        Value at = arith::AddIOp::create(
            lb, count, popCount(lb, bitsBelow(lb, mask, lane32)));
        buildIfThen(lb, attended,
                    [&](ImplicitLocOpBuilder &wb) { onEntry(wb, s32, at); });
        return {arith::AddIOp::create(lb, count, popCount(lb, mask)),
                arith::MaxSIOp::create(
                    lb, last,
                    shuffle(lb, upTo, kLanes - 1, gpu::ShuffleMode::IDX))};
      });
  return state[0];
}

Value mlir::pisa::detail::listAttendedBlocks(ImplicitLocOpBuilder &b,
                                             Value selection, ValueRange row,
                                             Value numKeys, Value keyEnd,
                                             int64_t blockSize, int64_t topK,
                                             Value tid, Value list) {
  Value firstWarp =
      cmp(b, arith::CmpIPredicate::ult, tid, indexConst(b, kLanes));
  return walkAttendedBlocksByWarp(
      b, selection, row, numKeys, keyEnd, blockSize, topK,
      arith::RemUIOp::create(b, tid, indexConst(b, kLanes)),
      [&](ImplicitLocOpBuilder &lb, Value s32, Value at) {
        buildIfThen(lb, firstWarp, [&](ImplicitLocOpBuilder &wb) {
          memref::StoreOp::create(wb, s32, list, at);
        });
      });
}

Value QueryKeys::row(ImplicitLocOpBuilder &b, Value key) const {
  return firstKey ? arith::AddIOp::create(b, firstKey, key).getResult() : key;
}

Value mlir::pisa::detail::packedBatchRules(ImplicitLocOpBuilder &b,
                                           const Kernel &kernel) {
  if (!kernel.has("cuSeqlensQ"))
    return Value();
  return batchRulesHold(
      b, kernel.arg("cuSeqlensK"), dimOf(b, kernel.arg("keys"), 2),
      kernel.arg("cuSeqlensQ"), dimOf(b, kernel.arg("selection"), 2));
}

QueryKeys mlir::pisa::detail::queryKeysOf(ImplicitLocOpBuilder &b,
                                          const Kernel &kernel, Value query,
                                          Value batchRules) {
  Value keys = kernel.arg("keys");
  if (!kernel.has("cuSeqlensQ")) {
    Value numKeys = dimOf(b, keys, 2);
    return {arith::AddIOp::create(b, kernel.arg("queryOffset"), query), Value(),
            numKeys, Value(), Value()};
  }
  QueryRowSequence seq =
      sequenceOfQueryRow(b, kernel.arg("cuSeqlensQ"), kernel.arg("cuSeqlensK"),
                         dimOf(b, kernel.arg("selection"), 2),
                         dimOf(b, keys, 2), query, batchRules);
  Value zero = indexConst(b, 0);
  return {seq.position,
          arith::SelectOp::create(b, seq.valid, seq.keys.first, zero),
          arith::SelectOp::create(b, seq.valid, seq.keys.count, zero),
          seq.valid, seq.seq};
}

Value mlir::pisa::detail::nanIfBroken(ImplicitLocOpBuilder &b,
                                      const QueryKeys &keys, Value x) {
  if (!keys.valid)
    return x;
  return arith::SelectOp::create(
      b, keys.valid, x, f32Const(b, std::numeric_limits<float>::quiet_NaN()));
}

std::pair<Value, Value>
mlir::pisa::detail::brokenBatchAsNaN(ImplicitLocOpBuilder &b,
                                     const QueryKeys &keys,
                                     std::pair<Value, Value> end) {
  return {nanIfBroken(b, keys, end.first), nanIfBroken(b, keys, end.second)};
}

void mlir::pisa::detail::addPackedOperands(
    SmallVectorImpl<KernelOperand> &operands, Value cuQueries, Value cuKeys) {
  if (!cuQueries)
    return;
  operands.push_back({"cuSeqlensQ", cuQueries});
  operands.push_back({"cuSeqlensK", cuKeys});
}

namespace {

/// The kernel body: one block per (query, batch x KV head). Its values are
/// the block's coordinates and shared tiles, built once at the top.
class AttentionBlock {
public:
  AttentionBlock(ImplicitLocOpBuilder &b, const Kernel &e,
                 const AttentionTiles &t, int64_t groupSize, int64_t kvHeads,
                 float scale)
      : e(e), t(t), G(groupSize), scale(scale) {
    MLIRContext *ctx = b.getContext();
    elem = cast<MemRefType>(e.arg("queries").getType()).getElementType();
    Value bytes = gpu::DynamicSharedMemoryOp::create(
        b,
        MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                        MemRefLayoutAttrInterface(),
                        gpu::AddressSpaceAttr::get(
                            ctx, gpu::GPUDialect::getWorkgroupAddressSpace())));
    auto view = [&](int64_t offset, ArrayRef<int64_t> shape, Type type) {
      return memref::ViewOp::create(b, workgroupType(ctx, shape, type), bytes,
                                    indexConst(b, offset), ValueRange{})
          .getResult();
    };
    const int64_t R = t.rows, c = t.blockSize;
    qTile = view(t.queryOffset, {R, t.queryStride}, elem);
    kTile = view(t.keyOffset, {c, t.keyStride}, elem);
    vTile = view(t.valueOffset, {c, t.valueStride}, elem);
    sTile = view(t.scoreOffset, {R, t.scoreStride}, b.getF32Type());
    pTile = view(t.probOffset, {R, t.probStride}, elem);
    oTile = view(t.outOffset, {R, t.outStride}, b.getF32Type());
    blockList = view(t.listOffset, {t.topK}, b.getI32Type());

    query = blockIdX(b);
    batch = arith::DivUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
    kv = arith::RemUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
    tid = threadIdX(b);
    warp = arith::DivUIOp::create(b, tid, indexConst(b, 32));
    firstHead = arith::MulIOp::create(b, kv, indexConst(b, G));
    keys = queryKeysOf(b, e, query);
    numKeys = keys.numKeys;
    lastKey = arith::SubIOp::create(b, numKeys, indexConst(b, 1));
    // Keys past the query or past N are never attended.
    Value position = keys.position;
    keyEnd = arith::MinUIOp::create(
        b, numKeys, arith::AddIOp::create(b, position, indexConst(b, 1)));
    // The softmax's row and columns: [part * n, part * n + n).
    row = arith::DivUIOp::create(b, tid, indexConst(b, t.threadsPerRow));
    part = arith::RemUIOp::create(b, tid, indexConst(b, t.threadsPerRow));
    scoreCol0 = arith::MulIOp::create(b, part, indexConst(b, t.scoreColumns));
    outCol0 = arith::MulIOp::create(b, part, indexConst(b, t.outColumns));
  }

  void build(ImplicitLocOpBuilder &b) {
    const float negInf = -std::numeric_limits<float>::infinity();
    stageQueries(b);
    vector::StoreOp::create(b, f32Splat(b, outRowType(b), 0.0f), oTile,
                            ValueRange{row, outCol0}, false,
                            llvm::MaybeAlign(16));
    Value count =
        listAttendedBlocks(b, e.arg("selection"), {batch, kv, query}, numKeys,
                           keyEnd, t.blockSize, t.topK, tid, blockList);
    gpu::BarrierOp::create(b); // the list and Q are visible to all
    // Q's tile is read once, before the loop: its A fragments stay in
    // registers for every block's score product.
    queryTile = vector::TransferReadOp::create(
        b, VectorType::get({t.rows, t.headDim}, elem), qTile,
        ValueRange{indexConst(b, 0), indexConst(b, 0)},
        arith::ConstantOp::create(b, b.getZeroAttr(elem)),
        SmallVector<bool>(2, true));

    Value zero = indexConst(b, 0);
    SmallVector<Value> init{f32Const(b, negInf), f32Const(b, 0.0f)};
    SmallVector<Value> state =
        buildLoop(b, zero, count, init,
                  [&](ImplicitLocOpBuilder &lb, Value j,
                      ValueRange st) -> SmallVector<Value> {
                    gpu::BarrierOp::create(lb); // block j - 1's tiles are read
                    store(lb, fetch(lb, j));
                    gpu::BarrierOp::create(lb);
                    return attend(lb, j, st[0], st[1]);
                  });
    gpu::BarrierOp::create(b); // the last value product is in O
    writeOutput(b, state[0], state[1]);
    gpu::ReturnOp::create(b);
  }

private:
  VectorType chunkType(ImplicitLocOpBuilder &b) const {
    return VectorType::get({kChunkElems}, elem);
  }
  Value zeroChunk(ImplicitLocOpBuilder &b) const {
    return arith::ConstantOp::create(
        b, chunkType(b),
        DenseElementsAttr::get(chunkType(b), b.getZeroAttr(elem)));
  }
  VectorType outRowType(ImplicitLocOpBuilder &b) const {
    return VectorType::get({t.outColumns}, b.getF32Type());
  }
  /// The query's head rows (rows past G are zeros), 16-byte copies.
  void stageQueries(ImplicitLocOpBuilder &b) {
    ChunkedTile tile{t.rows, t.headDim, kAttentionThreads};
    copyChunks(
        b, tile, tid,
        [&](ImplicitLocOpBuilder &lb, Value i) -> Value {
          Value r = tile.row(lb, i);
          Value head = arith::AddIOp::create(
              lb, firstHead,
              arith::MinUIOp::create(lb, r, indexConst(lb, G - 1)));
          Value v = vector::LoadOp::create(
              lb, chunkType(lb), e.arg("queries"),
              ValueRange{batch, head, query, tile.column(lb, i)}, false,
              llvm::MaybeAlign(16));
          return arith::SelectOp::create(
              lb, cmp(lb, arith::CmpIPredicate::ult, r, indexConst(lb, G)), v,
              zeroChunk(lb));
        },
        [&](ImplicitLocOpBuilder &lb, Value i, Value v) {
          vector::StoreOp::create(
              lb, v, qTile, ValueRange{tile.row(lb, i), tile.column(lb, i)},
              false, llvm::MaybeAlign(16));
        });
  }

  /// The first key of list entry j.
  Value firstKeyOf(ImplicitLocOpBuilder &b, Value j) const {
    return arith::MulIOp::create(
        b, toIndex(b, memref::LoadOp::create(b, blockList, j)),
        indexConst(b, t.blockSize));
  }

  /// This thread's 16-byte chunks of list entry j's keys, then values
  /// (chunk i of a tile is i = tid + 128 n), all loads issued before the
  /// first store; rows past N are zeros (a zero probability times a garbage
  /// value could be NaN). Loading block j + 1 while block j is computed
  /// measured no faster (CHANGELOG.md's performance history), so blocks are
  /// staged in turn.
  SmallVector<Value> fetch(ImplicitLocOpBuilder &b, Value j) const {
    Value firstKey = firstKeyOf(b, j);
    SmallVector<Value> chunks;
    for (auto [operand, width] :
         {std::pair<StringRef, int64_t>{"keys", t.headDim},
          {"values", t.valueDim}}) {
      StringRef name = operand;
      ChunkedTile tile{t.blockSize, width, kAttentionThreads};
      llvm::append_range(
          chunks,
          loadChunks(b, tile, tid, [&](ImplicitLocOpBuilder &lb, Value i) {
            Value key = arith::AddIOp::create(lb, firstKey, tile.row(lb, i));
            Value v = vector::LoadOp::create(
                lb, chunkType(lb), e.arg(name),
                ValueRange{
                    batch, kv,
                    keys.row(lb, arith::MinUIOp::create(lb, key, lastKey)),
                    tile.column(lb, i)},
                false, llvm::MaybeAlign(16));
            return arith::SelectOp::create(
                lb, cmp(lb, arith::CmpIPredicate::ult, key, numKeys), v,
                zeroChunk(lb));
          }));
    }
    return chunks;
  }

  /// Stores fetch()'s chunks into the key and value tiles.
  void store(ImplicitLocOpBuilder &b, ArrayRef<Value> chunks) const {
    for (auto [target, width] :
         {std::pair<Value, int64_t>{kTile, t.headDim}, {vTile, t.valueDim}}) {
      Value tileBuffer = target;
      ChunkedTile tile{t.blockSize, width, kAttentionThreads};
      storeChunks(b, tile, tid, chunks.take_front(tile.passes()),
                  [&](ImplicitLocOpBuilder &wb, Value i, Value v) {
                    vector::StoreOp::create(
                        wb, v, tileBuffer,
                        ValueRange{tile.row(wb, i), tile.column(wb, i)}, false,
                        llvm::MaybeAlign(16));
                  });
      chunks = chunks.drop_front(tile.passes());
    }
  }

  /// List entry j, staged: the scores, the row's online softmax and O +=
  /// P V. Returns the row's new (max, sum), base 2.
  SmallVector<Value> attend(ImplicitLocOpBuilder &b, Value j, Value max,
                            Value sum) const {
    scoreBlock(b);
    gpu::BarrierOp::create(b);
    SmallVector<Value> next = softmaxStep(b, j, max, sum);
    gpu::BarrierOp::create(b);
    accumulateValues(b);
    return next;
  }

  /// S = Q K^T: warp w scores the block's keys [w C/4, (w + 1) C/4).
  void scoreBlock(ImplicitLocOpBuilder &b) const {
    const int64_t keysPerWarp = t.blockSize / kAttentionWarps;
    Value zero = indexConst(b, 0);
    Value pad = arith::ConstantOp::create(b, b.getZeroAttr(elem));
    SmallVector<bool> inBounds(2, true);
    Value warpKey0 = arith::MulIOp::create(b, warp, indexConst(b, keysPerWarp));
    Value rhs = vector::TransferReadOp::create(
        b, VectorType::get({keysPerWarp, t.headDim}, elem), kTile,
        ValueRange{warpKey0, zero}, pad, inBounds);
    auto accType = VectorType::get({t.rows, keysPerWarp}, b.getF32Type());
    Value product = tileProduct(b, queryTile, rhs, f32Splat(b, accType, 0.0f),
                                /*rhsIsKN=*/false);
    vector::TransferWriteOp::create(b, product, sTile,
                                    ValueRange{zero, warpKey0}, inBounds);
  }

  /// The row's online softmax over list entry j's visible keys (base 2, the
  /// scale folded into one multiply): P = exp2(logit - new max) into the
  /// P tile, and the row of O rescaled by exp2(old max - new max). Returns
  /// the row's new (max, sum).
  SmallVector<Value> softmaxStep(ImplicitLocOpBuilder &b, Value j, Value max,
                                 Value sum) const {
    Value firstKey = firstKeyOf(b, j);
    auto scoreRow = VectorType::get({t.scoreColumns}, b.getF32Type());
    Value raw =
        vector::LoadOp::create(b, scoreRow, sTile, ValueRange{row, scoreCol0},
                               false, llvm::MaybeAlign(16));
    Value visible = arith::SubIOp::create(
        b, arith::SubIOp::create(b, keyEnd, firstKey), scoreCol0);
    visible = arith::MinSIOp::create(b, visible,
                                     indexConst(b, t.scoreColumns)); // i32
    Value logits =
        maskedRowLogits(b, raw, iotaI32(b, t.scoreColumns), visible, scale);
    auto reassoc = arith::FastMathFlags::reassoc;
    // The threads that share the row.
    SmallVector<int64_t> rowLanes = consecutiveLaneMasks(t.threadsPerRow);
    Value blockMax =
        laneAllReduce(b,
                      vector::ReductionOp::create(
                          b, vector::CombiningKind::MAXIMUMF, logits, reassoc),
                      rowLanes, /*isMax=*/true);
    auto [newMax, shift] = onlineMaxStep(b, max, blockMax);
    Value probs =
        shiftedExp2(b, logits, vector::BroadcastOp::create(b, scoreRow, shift));
    Value blockSum =
        laneAllReduce(b,
                      vector::ReductionOp::create(b, vector::CombiningKind::ADD,
                                                  probs, reassoc),
                      rowLanes, /*isMax=*/false);
    Value alpha = rescaleFactor(b, max, shift);
    Value newSum = rescaledSum(b, sum, alpha, blockSum);
    vector::StoreOp::create(
        b,
        arith::TruncFOp::create(b, VectorType::get({t.scoreColumns}, elem),
                                probs),
        pTile, ValueRange{row, scoreCol0}, false,
        llvm::MaybeAlign(std::min<int64_t>(16, t.scoreColumns * 2)));
    rescaleOutputRow(b, alpha);
    return {newMax, newSum};
  }

  /// The row of O times alpha. alpha = 1 (the row's max did not grow: most
  /// blocks after the first few) leaves O as it is, so its shared-memory
  /// round trip is skipped.
  void rescaleOutputRow(ImplicitLocOpBuilder &b, Value alpha) const {
    buildIfThen(
        b,
        arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, alpha,
                              f32Const(b, 1.0f)),
        [&](ImplicitLocOpBuilder &rb) {
          Value acc = vector::LoadOp::create(rb, outRowType(rb), oTile,
                                             ValueRange{row, outCol0}, false,
                                             llvm::MaybeAlign(16));
          vector::StoreOp::create(
              rb,
              arith::MulFOp::create(
                  rb, acc,
                  vector::BroadcastOp::create(rb, outRowType(rb), alpha)),
              oTile, ValueRange{row, outCol0}, false, llvm::MaybeAlign(16));
        });
  }

  /// O += P V: warp w owns the columns [w dv/4, (w + 1) dv/4).
  void accumulateValues(ImplicitLocOpBuilder &b) const {
    Type f32 = b.getF32Type();
    const int64_t R = t.rows, c = t.blockSize;
    const int64_t colsPerWarp = t.valueDim / kAttentionWarps;
    Value zero = indexConst(b, 0);
    Value pad = arith::ConstantOp::create(b, b.getZeroAttr(elem));
    SmallVector<bool> inBounds(2, true);
    Value warpCol0 = arith::MulIOp::create(b, warp, indexConst(b, colsPerWarp));
    Value lhs =
        vector::TransferReadOp::create(b, VectorType::get({R, c}, elem), pTile,
                                       ValueRange{zero, zero}, pad, inBounds);
    Value rhs = vector::TransferReadOp::create(
        b, VectorType::get({c, colsPerWarp}, elem), vTile,
        ValueRange{zero, warpCol0}, pad, inBounds);
    Value accTile = vector::TransferReadOp::create(
        b, VectorType::get({R, colsPerWarp}, f32), oTile,
        ValueRange{zero, warpCol0},
        arith::ConstantOp::create(b, b.getZeroAttr(f32)), inBounds);
    Value product = tileProduct(b, lhs, rhs, accTile, /*rhsIsKN=*/true);
    vector::TransferWriteOp::create(b, product, oTile,
                                    ValueRange{zero, warpCol0}, inBounds);
  }

  /// Row r < G is head firstHead + r: o = O / sum (0 without keys), lse =
  /// ln 2 (max + log2 sum) (-inf without keys).
  void writeOutput(ImplicitLocOpBuilder &b, Value max, Value sum) const {
    using P = arith::CmpIPredicate;
    std::pair<Value, Value> end =
        brokenBatchAsNaN(b, keys, rowEnd(b, max, sum));
    Value inverse = end.first, lse = end.second;
    buildIfThen(
        b, cmp(b, P::ult, row, indexConst(b, G)),
        [&](ImplicitLocOpBuilder &wb) {
          Value head = arith::AddIOp::create(wb, firstHead, row);
          Value acc = vector::LoadOp::create(wb, outRowType(wb), oTile,
                                             ValueRange{row, outCol0}, false,
                                             llvm::MaybeAlign(16));
          Value out = arith::TruncFOp::create(
              wb, VectorType::get({t.outColumns}, elem),
              arith::MulFOp::create(
                  wb, acc,
                  vector::BroadcastOp::create(wb, outRowType(wb), inverse)));
          vector::StoreOp::create(
              wb, out, e.arg("output"), ValueRange{batch, head, query, outCol0},
              false, llvm::MaybeAlign(std::min<int64_t>(16, t.outColumns * 2)));
          buildIfThen(wb, cmp(wb, P::eq, part, indexConst(wb, 0)),
                      [&](ImplicitLocOpBuilder &lb) {
                        memref::StoreOp::create(lb, lse, e.arg("lse"),
                                                ValueRange{batch, head, query});
                      });
        });
  }

  const Kernel &e;
  const AttentionTiles &t;
  int64_t G;
  float scale;
  Type elem;
  Value qTile, kTile, vTile, sTile, pTile, oTile, blockList;
  /// Q's tile, read once before the block loop (set by build()).
  Value queryTile;
  QueryKeys keys;
  Value query, batch, kv, tid, warp, firstHead, numKeys, lastKey, keyEnd;
  Value row, part, scoreCol0, outCol0;
};

struct SparseAttentionToGPU : KernelOpPattern<SparseAttentionKernelOp> {
  using KernelOpPattern::KernelOpPattern;

  void lower(SparseAttentionKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    MemRefType qType = bufferType(op.getQueries());
    const int64_t kvHeads = bufferType(op.getKeys()).getShape()[1];
    const int64_t G = qType.getShape()[1] / kvHeads;
    const int64_t d = qType.getShape()[3];
    const int64_t dv = bufferType(op.getValues()).getShape()[3];
    const int64_t topK = bufferType(op.getSelection()).getShape()[3];
    const float scale = op.getScale().convertToFloat();
    KernelConfigAttr config = getKernelConfig(op);
    const bool inRegisters = config.getEpilogue() == KernelEpilogue::Registers;
    // Queries a block on query tiles (0: the per-query kernels).
    const int64_t tileQueries = config.getUnionQueries().value_or(0);
    const AttentionTiles tiles(G, d, dv, op.getBlockSize(), topK);
    RegisterAttentionPlan plan(d, dv, op.getBlockSize(), topK);
    plan.prefetchEntries = config.getPrefetchAhead().value_or(0);
    const QueryTileAttentionPlan tilePlan(std::max<int64_t>(tileQueries, 1), d,
                                          dv, op.getBlockSize(), topK);
    const int64_t sharedBytes = tileQueries   ? tilePlan.bytes
                                : inRegisters ? plan.bytes
                                              : tiles.bytes;
    SmallVector<KernelOperand> operands = forwardOperands(op);
    addPackedOperands(operands, op.getCuSeqlensQ(), op.getCuSeqlensK());
    Kernel kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      kernel = createKernelFor(rewriter, op, "sparse_attention", operands);
      applyOccupancyHint(kernel.func(), config);
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      if (tileQueries)
        buildQueryTileAttention(b, kernel, tilePlan, G, kvHeads, scale);
      else if (inRegisters)
        buildRegisterAttention(b, kernel, plan, G, kvHeads, scale);
      else
        AttentionBlock(b, kernel, tiles, G, kvHeads, scale).build(b);
    }
    Value groups = arith::MulIOp::create(host, dimOf(host, op.getQueries(), 0),
                                         indexConst(host, kvHeads));
    Value gridX = dimOf(host, op.getQueries(), 2);
    if (tileQueries || inRegisters)
      gridX = host.createOrFold<arith::CeilDivUIOp>(
          gridX, indexConst(host, tileQueries ? tileQueries
                                              : kAttentionQueriesPerBlock));
    launch(host, kernel, gridX, groups, config.getThreads(), operands,
           sharedBytes);
  }
};

} // namespace

void mlir::pisa::populateAttentionKernelToGPUPatterns(
    RewritePatternSet &patterns) {
  patterns.add<SparseAttentionToGPU>(patterns.getContext());
  populateAttentionGradPatterns(patterns);
}
