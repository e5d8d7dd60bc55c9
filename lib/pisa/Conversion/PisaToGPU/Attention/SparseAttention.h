//===- SparseAttention.h - The sparse attention kernel's plan ---*- C++ -*-===//
//
// What --pisa-decompose-to-kernels checks (the limits) and what the kernel
// is built from (its shared-memory tiles) have one definition here.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_SPARSEATTENTION_H
#define PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_SPARSEATTENTION_H

#include "Kernels/KernelBuilder.h"
#include "Kernels/RowSoftmax.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <string>

namespace mlir::pisa::detail {

/// Four warps: each takes a quarter of a block's keys in the score product
/// and a quarter of dv in the value product.
constexpr int64_t kAttentionWarps = 4;
constexpr int64_t kAttentionThreads = 32 * kAttentionWarps;
/// What a block may use of an sm_90 SM's 228 KiB (1 KiB is reserved).
constexpr int64_t kMaxAttentionSharedBytes = 227 * 1024;
constexpr int64_t kMaxAttentionBlockSize = 128;
constexpr int64_t kMaxAttentionHeadDim = 256;
constexpr int64_t kMaxAttentionGroupSize = 64;
constexpr int64_t kMaxAttentionTopK = 4096;

/// The block's tiles, carved at fixed byte offsets out of one dynamic
/// shared-memory allocation (TOOLCHAIN.md: dynamic and static shared memory
/// must not be mixed). 16-bit tiles' rows are padded by 8 elements so that
/// ldmatrix's eight row reads fall in different banks.
struct AttentionTiles {
  /// Score rows: the G heads of the query, rounded up to 16, 32 or 64 so
  /// that the 128 threads split each row evenly in the softmax.
  int64_t rows;
  int64_t headDim, valueDim, blockSize, topK;
  /// Row strides in elements.
  int64_t queryStride, keyStride, valueStride, scoreStride, probStride,
      outStride;
  /// Byte offsets of Q [rows x d], K [C x d], V [C x dv] (16-bit), S [rows x
  /// C] (f32), P [rows x C] (16-bit), O [rows x dv] (f32) and the list of
  /// attended blocks [K] (i32), and the total.
  int64_t queryOffset, keyOffset, valueOffset, scoreOffset, probOffset,
      outOffset, listOffset, bytes;
  /// The softmax's threads per score row, and the columns of S and O each
  /// of them takes.
  int64_t threadsPerRow, scoreColumns, outColumns;

  AttentionTiles(int64_t groupSize, int64_t headDim, int64_t valueDim,
                 int64_t blockSize, int64_t topK);
};

/// How an attention kernel's limits read: `who` takes the inputs ("the
/// GPU kernel"), why 16-bit inputs, and the head dim's step and why.
struct AttentionKernelRules {
  StringRef who, elementReason;
  int64_t headDimStep;
  StringRef headDimReason;
  /// What the register kernels need to take C = 16 (the staged ones split
  /// a block's keys between four warps).
  StringRef blockOf16Needs;
};

/// The limits the forward and backward kernels share (element type, C, d,
/// dv, K, G), in their words, or nullopt. `takesBlockOf16`: whether the
/// register kernels take these sizes with C = 16.
std::optional<std::string>
attentionTileViolation(const AttentionKernelRules &rules, Type elem,
                       int64_t groupSize, int64_t headDim, int64_t valueDim,
                       int64_t blockSize, int64_t topK, bool takesBlockOf16);

/// Why the GPU kernel cannot take sparse attention of these sizes (the
/// message names the limit), or nullopt.
std::optional<std::string>
attentionLimitViolation(Type elem, int64_t groupSize, int64_t headDim,
                        int64_t valueDim, int64_t blockSize, int64_t topK);

/// Where a query row's keys are: rows firstKey .. firstKey + numKeys - 1
/// of the keys (firstKey null: from row 0), the row's position, and
/// whether its batch keeps the rules of docs/semantics.md section 7 (null:
/// a batch, always). A broken packed batch has no keys (numKeys = 0).
struct QueryKeys {
  Value position, firstKey, numKeys, valid;
  /// The packed sequence (null: a batch).
  Value seq;
  /// Key `key` of the sequence as a row of the keys.
  Value row(ImplicitLocOpBuilder &b, Value key) const;
};

/// Query `query`'s keys in an attention kernel: the batch's (N, position
/// queryOffset + query), or with the parameters cuSeqlensQ and cuSeqlensK
/// (a packed batch seen as a batch of one) its sequence's, found by a
/// binary search of cu_seqlens_q (Tq: the selection's rows). `batchRules`:
/// packedBatchRules computed once for the kernel's queries (null: the
/// call computes it).
QueryKeys queryKeysOf(ImplicitLocOpBuilder &b, const Kernel &kernel,
                      Value query, Value batchRules = Value());

/// Whether a packed batch's cu_seqlens keep the rules of section 7 (one
/// pass over them: computed once where a block takes several queries);
/// null for a batch.
Value packedBatchRules(ImplicitLocOpBuilder &b, const Kernel &kernel);

/// `x` (f32), or NaN when the query's packed batch breaks the rules
/// (`keys.valid` false): every result row of such a call is NaN, never a
/// plausible value.
Value nanIfBroken(ImplicitLocOpBuilder &b, const QueryKeys &keys, Value x);

/// A row's end (rowEnd's factor and lse), both nanIfBroken.
std::pair<Value, Value> brokenBatchAsNaN(ImplicitLocOpBuilder &b,
                                         const QueryKeys &keys,
                                         std::pair<Value, Value> end);

/// The operands an attention kernel op shares with the forward's, in its
/// kernels' parameter order: queries, keys, values, selection,
/// queryOffset, output, lse.
template <typename OpTy> SmallVector<KernelOperand> forwardOperands(OpTy op) {
  return {{"queries", op.getQueries()},
          {"keys", op.getKeys()},
          {"values", op.getValues()},
          {"selection", op.getSelection()},
          {"queryOffset", op.getQueryOffset()},
          {"output", op.getOutput()},
          {"lse", op.getLse()}};
}

/// The launch operands of an attention op's cu_seqlens when it has them
/// (appended to `operands`).
void addPackedOperands(SmallVectorImpl<KernelOperand> &operands,
                       Value cuQueries, Value cuKeys);

/// Walks the selection row `row` ({batch, KV head, query}) by section 6's
/// rule, calling `onEntry(b, attended, s32, count)` for each entry:
/// whether the entry is used and its block starts before `keyEnd`, the
/// entry, and how many entries before it were attended. Returns the
/// number attended.
Value walkAttendedBlocks(
    ImplicitLocOpBuilder &b, Value selection, ValueRange row, Value numKeys,
    Value keyEnd, int64_t blockSize, int64_t topK,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value, Value)>
        onEntry);

/// The same rule walked by a warp (every lane of it calls this, `lane`
/// its lane), 32 entries at a time, lane l taking entry 32 c + l, so that
/// the entries' loads are issued together: an entry is used when it is a
/// block of the sequence above every valid entry before it (a prefix max
/// over the lanes and the chunks before), and `onEntry(b, s32, at)` runs
/// on the lane of each attended entry with the count of attended entries
/// before it (a ballot). Returns the count (every lane).
Value walkAttendedBlocksByWarp(
    ImplicitLocOpBuilder &b, Value selection, ValueRange row, Value numKeys,
    Value keyEnd, int64_t blockSize, int64_t topK, Value lane,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> onEntry);

/// The blocks a query attends, in order, written to `list` (workgroup i32
/// [K]) by the block's first warp; every thread (`tid`, all of the block's)
/// gets the count, each warp walking the row (walkAttendedBlocksByWarp).
/// An entry s of the selection row `row` ({batch, KV head, query}) is used
/// when 0 <= s < ceil(N / C) and s > the last one used (docs/semantics.md,
/// section 6), attended when its block starts before `keyEnd` (min(N,
/// position + 1)).
Value listAttendedBlocks(ImplicitLocOpBuilder &b, Value selection,
                         ValueRange row, Value numKeys, Value keyEnd,
                         int64_t blockSize, int64_t topK, Value tid,
                         Value list);

/// Whether the query's heads fit one m16 tile and S, O and Q's fragments a
/// lane's registers (G <= 16, d a multiple of 32 up to 128, dv a multiple
/// of 8 up to 128, C a multiple of 16 up to 64; f16 or bf16): then the
/// kernel is AttentionInRegisters.cpp's, each warp attending its own
/// blocks, else the staged one.
bool attendsInRegisters(Type elem, int64_t groupSize, int64_t headDim,
                        int64_t valueDim, int64_t blockSize);

/// Consecutive queries a block of the register kernel attends, a warp
/// each, at the same time: they share their forced blocks (0 and the last
/// two), whose keys and values meet in L1.
constexpr int64_t kAttentionQueriesPerBlock = kAttentionWarps;

/// The register kernel's shared memory: each warp's slot, its V tile [C x
/// dv] (rows padded by 8 elements for ldmatrix) which its result reuses at
/// the end, then each warp's list of attended blocks [K] (i32).
struct RegisterAttentionPlan {
  int64_t headDim, valueDim, blockSize, topK;
  /// V's row stride (elements), one warp's V tile (bytes), one warp's
  /// result row (f32 elements), one warp's slot for either (bytes), the
  /// lists' byte offset, one list's bytes and the total.
  int64_t valueStride, valueTileBytes, resultStride, warpBytes, listOffset,
      listBytes, bytes;
  /// Entry j asks the L2 for entry j + prefetchEntries's K and V rows (0:
  /// none; kernel_config prefetch_ahead).
  int64_t prefetchEntries = 0;
  RegisterAttentionPlan(int64_t headDim, int64_t valueDim, int64_t blockSize,
                        int64_t topK);
};

/// The register kernel's body (kernel parameters as the staged kernel's).
void buildRegisterAttention(ImplicitLocOpBuilder &b, const Kernel &kernel,
                            const RegisterAttentionPlan &plan,
                            int64_t groupSize, int64_t kvHeads, float scale);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_SPARSEATTENTION_H
