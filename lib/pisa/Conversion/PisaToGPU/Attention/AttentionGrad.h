//===- AttentionGrad.h - The backward kernels' plans and limits -*- C++ -*-===//
//
// What --pisa-decompose-to-kernels checks (the limits) and what the
// backward's two block kernels are built from (their shared-memory tiles)
// have one definition here.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_ATTENTIONGRAD_H
#define PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_ATTENTIONGRAD_H

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Types.h"

#include <optional>
#include <string>

namespace mlir::pisa::detail {

/// Four warps per block, as the forward's staged kernel.
constexpr int64_t kGradWarps = 4;
constexpr int64_t kGradThreads = 32 * kGradWarps;
/// Queries per block of the kernel that marks which queries attend a block.
constexpr int64_t kMarkThreads = 128;

/// Where head rows sit in a tile: `rows` rows, token s's heads at rows
/// [s R, (s + 1) R) (R = rowsPerToken, G rounded up), `tokens` = rows / R
/// tokens at a time; threadsPerRow consecutive lanes split a row.
struct GradRows {
  int64_t rows, rowsPerToken, tokens, threadsPerRow;
  GradRows(int64_t rows, int64_t rowsPerToken);
  /// A row's columns each thread takes out of `width`.
  int64_t columns(int64_t width) const { return width / threadsPerRow; }
};

/// The query kernel's tiles (byte offsets into dynamic shared memory): Q
/// [R x d], dO [R x dv], K [C x d], V [C x dv] (16-bit, rows padded by 8
/// elements), S and dP [R x C] (f32), dS [R x C] (16-bit), dq [R x d]
/// (f32) and the list of attended blocks [K] (i32). R: G rounded up to 16,
/// 32 or 64 (one query).
struct QueryGradPlan {
  GradRows rows;
  int64_t headDim, valueDim, blockSize, topK;
  int64_t query, gradOut, key, value, score, gradProb, gradScore, gradQuery,
      list, bytes;
  QueryGradPlan(int64_t groupSize, int64_t headDim, int64_t valueDim,
                int64_t blockSize, int64_t topK);
};

/// The key kernel's tiles: K [C x d] and V [C x dv] of the block, Q [64 x
/// d] and dO [64 x dv] of the step's queries (64 / R of them, R = G
/// rounded up to a power of two; 16-bit), S and dP [64 x C] (f32), P^T
/// and dS^T [C x 64] (16-bit), the dk [C x d] and dv [C x dv]
/// accumulators (f32), a window of the query bits [128] and the step's
/// queries [64] (i32).
struct KeyGradPlan {
  GradRows rows;
  int64_t headDim, valueDim, blockSize;
  int64_t key, value, query, gradOut, score, gradProb, probT, gradScoreT,
      gradKey, gradValue, words, stepQueries, bytes;
  KeyGradPlan(int64_t groupSize, int64_t headDim, int64_t valueDim,
              int64_t blockSize);
};

/// A key block's queries are split into at most this many segments, one
/// block each, of at least kMinSegmentWords bit words (32 queries a word);
/// the segments add their sums in order (docs/gpu.md, "Sparse attention
/// backward").
constexpr int64_t kMaxKeySegments = 16;
constexpr int64_t kMinSegmentWords = 8;

/// Query-bit words a key block reads into shared memory at a time.
constexpr int64_t kBitWindow = 128;

/// Why the backward's GPU kernels cannot take these sizes (the message
/// names the limit), or nullopt.
std::optional<std::string>
attentionGradLimitViolation(Type elem, int64_t groupSize, int64_t headDim,
                            int64_t valueDim, int64_t blockSize, int64_t topK);

/// The backward's patterns (AttentionGradToGPU.cpp).
void populateAttentionGradPatterns(RewritePatternSet &patterns);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_ATTENTIONGRAD_H
