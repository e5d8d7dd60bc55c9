//===- RowSoftmax.h - The row LogSumExp and online softmax ------*- C++ -*-===//
//
// The arithmetic every scoring and attention kernel shares, written once:
// a row's LogSumExp in base 2 (its max, the shift an empty row takes, the
// sum of exp2(x - shift), max + log2(sum)), the online softmax's step
// (FlashAttention's rescale of a running max, sum and output), a row's end
// (1 / sum and the LSE in base e), and reductions across the lanes that
// share a row. The kernels differ only in where a row's values live (a
// lane's registers, a quad, half a warp, a vector); they pass those values
// here. The causal mask and the sum of a query's head LSEs are here too.
// Scores are in base 2 (exp2 and log2 are single instructions):
// logits are scaled by log2(e), LSEs taken back to base e with ln(2).
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_KERNELS_ROWSOFTMAX_H
#define PISA_LIB_CONVERSION_PISATOGPU_KERNELS_ROWSOFTMAX_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <utility>

namespace mlir::pisa::detail {

/// `v` reduced (max, or sum) over the lanes whose index differs from this
/// one's only in the bits of `masks`: one xor shuffle per mask, in order.
Value laneAllReduce(ImplicitLocOpBuilder &b, Value v, ArrayRef<int64_t> masks,
                    bool isMax);

/// The masks of `width` consecutive lanes (a power of two): 1, 2, ...,
/// width / 2.
SmallVector<int64_t> consecutiveLaneMasks(int64_t width);

/// The masks of `width` consecutive lanes (a power of two) from the
/// widest: width / 2, ..., 2, 1.
SmallVector<int64_t> halvingLaneMasks(int64_t width);

/// `v` summed over the lanes of `masks` (laneAllReduce's add): the GQA
/// head sum (docs/semantics.md: u sums the LSEs of a query's G heads) when
/// each lane holds one head's LSE, or a row's or a dot product's sum.
Value laneSum(ImplicitLocOpBuilder &b, Value v, ArrayRef<int64_t> masks);

/// The GQA head sum of G LSEs held in shared memory at lses[first, first +
/// G): summed in order, as a vector of G.
Value headSumInShared(ImplicitLocOpBuilder &b, Value lses, Value first,
                      int64_t G);

/// The masked causal tile: a score becomes a logit, x * scale, where its key
/// is visible to the row's query (at or before it, and before N) and -inf
/// elsewhere, so that it takes no part in the row's softmax.
Value maskedLogit(ImplicitLocOpBuilder &b, Value x, Value visible, Value scale,
                  Value negInf);

/// A row of raw scores (vector<n x f32>) as logits in base 2 (scale times
/// log2 e folded into one multiply): element i is masked unless columns[i]
/// (its key's offset in the tile, vector<n x i32>) < visible (the index of
/// the first key the row's query does not see, relative to the tile).
Value maskedRowLogits(ImplicitLocOpBuilder &b, Value raw, Value columns,
                      Value visible, float scale);

/// What a row's exponents subtract: its max, or 0 for a row with no visible
/// key (max = -inf), so that exp2(x - shift) is 0 there, not NaN.
Value emptyRowShift(ImplicitLocOpBuilder &b, Value max);

/// exp2(x - shift); x and shift of one type (f32 or a vector of f32).
Value shiftedExp2(ImplicitLocOpBuilder &b, Value x, Value shift);

/// A row's LSE in base 2 from the shift its exponents took and their sum:
/// shift + log2(sum) (one MUFU lg2, fastLog2).
Value lse2FromSum(ImplicitLocOpBuilder &b, Value shift, Value sum);

/// A value in base 2 (an LSE or a sum of them) in base e: x ln 2.
Value toBaseE(ImplicitLocOpBuilder &b, Value x);

/// The row LSE in base 2 of `scale` times `products` (this lane's values of
/// the row, then the lanes of `laneMasks`), for finite products and a
/// positive scale (scale times log2 e): since max(s x) = s max(x), the scale
/// goes into each exponent's fused multiply-add, exp2(fma(x, s, -s max)),
/// one instruction before each exponential instead of a multiply and a
/// subtract.
Value scaledRowLse2(ImplicitLocOpBuilder &b, ArrayRef<Value> products,
                    Value scale, ArrayRef<int64_t> laneMasks);

/// The max of a row of `logits` over this lane's values, then the lanes of
/// `laneMasks`.
Value rowMax(ImplicitLocOpBuilder &b, ArrayRef<Value> logits,
             ArrayRef<int64_t> laneMasks);

/// One step of the online softmax: a row whose running max is `oldMax`
/// sees a block whose max is `blockMax`. Its new max, and the shift the
/// block's exponents (and the rescale) take.
struct OnlineMax {
  Value max, shift;
};
OnlineMax onlineMaxStep(ImplicitLocOpBuilder &b, Value oldMax, Value blockMax);

/// The factor the row's earlier sum and output shrink by: exp2(oldMax -
/// shift) (1 when the max did not grow).
Value rescaleFactor(ImplicitLocOpBuilder &b, Value oldMax, Value shift);

/// The running sum after a block: sum * alpha + blockSum.
Value rescaledSum(ImplicitLocOpBuilder &b, Value sum, Value alpha,
                  Value blockSum);

/// A row's end from its max and sum (base 2): the factor o = O * inverse (0
/// for a row with no key) and lse = ln 2 (max + log2 sum) (-inf then).
std::pair<Value, Value> rowEnd(ImplicitLocOpBuilder &b, Value max, Value sum);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_KERNELS_ROWSOFTMAX_H
