//===- WarpQueryGrad.h - One warp's dq of one query ------------*- C++ -*-===//
//
// The dq pass's kernels where a query's G heads fit one m16 tile (G <= 16)
// give each query a warp, lane (g, i) = (lane / 4, lane % 4) holding head
// rows g and g + 8 in the m16n8 accumulator layout (WarpMma.h). What such a
// warp computes, whatever tiles its K and V come from, is here: the rows'
// exponent shifts and D = dO . o, an entry's dS from its S and dP, dQ +=
// dS K, and the scaled dq written out. The query-tile kernel
// (QueryGradTiles.cpp) and the register kernel (QueryGradInRegisters.cpp)
// are built on it.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_WARPQUERYGRAD_H
#define PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_WARPQUERYGRAD_H

#include "Attention/SparseAttention.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/WarpMma.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <utility>

namespace mlir::pisa::detail {

/// One warp's dq of query `query` (of ThreadPlace's batch and KV head):
/// the kernel operands e ("lse", "output", "gradOutput", "delta",
/// "gradQueries"), `hasQuery` (false: the warp computes for a clamped
/// query and writes nothing), its keys (for a broken packed batch's NaN).
class WarpQueryGrad {
public:
  WarpQueryGrad(const Kernel &e, const ThreadPlace &at, Value query,
                Value hasQuery, const QueryKeys &keys, int64_t groupSize,
                int64_t valueDim, float scale);

  /// Head h of the KV head for tile row `row` (rows past G read head G - 1).
  Value headOf(ImplicitLocOpBuilder &b, Value row) const;

  /// Each row half's exponent shift (probabilityShift of its lse) and D =
  /// dO . o, written for the key kernel by the quad's first lane.
  void beginRows(ImplicitLocOpBuilder &b);

  /// An entry's dS = P (dP - D) from the S and dP accumulators (one per n8
  /// tile of the block's keys), keys at or past `visible` masked: per n8
  /// tile its four values, [half * 2 + j].
  SmallVector<SmallVector<Value>> scoreGradients(ImplicitLocOpBuilder &b,
                                                 ArrayRef<Value> s,
                                                 ArrayRef<Value> dp,
                                                 Value visible) const;

  /// dQ + dS K: dS's A fragments are its f32 values rounded in place, K
  /// ([C x d] in `keyTile`, rows padded for ldmatrix) by ldmatrix.trans;
  /// `dq` holds one accumulator per n8 tile of d.
  SmallVector<Value> accumulate(ImplicitLocOpBuilder &b,
                                ArrayRef<SmallVector<Value>> grads,
                                Value keyTile, ValueRange dq) const;

  /// dq = scale dQ for the rows that are heads.
  void write(ImplicitLocOpBuilder &b, ArrayRef<Value> dq) const;

private:
  /// The lane's tile row of row half `half` (g, or g + 8 for 1) and
  /// whether it is a head row of a real query.
  std::pair<Value, Value> headRow(ImplicitLocOpBuilder &b, int64_t half) const;

  /// D = dO . o of head row `head` (0 for rows that are not heads): the
  /// lane sums its quarter of the row, then the quad.
  Value rowDelta(ImplicitLocOpBuilder &b, Value head, Value isHead) const;

  const Kernel &e;
  Value batch, kv, lane, gid, tig, query, hasQuery;
  QueryKeys keys;
  int64_t G, valueDim;
  float scale;
  Type elem;
  Value shift[2], delta[2];
};

/// Whether the register dq kernel takes these sizes: G <= 16 (one m16
/// tile), d a multiple of 16 up to 128 (dQ in a lane's registers: d / 2
/// f32), dv a multiple of 32 up to 128 (dO's fragments loaded 16 bytes at
/// a time, in registers: dv / 4), C of 16, 32 or 64, 16-bit inputs.
bool queryGradInRegisters(Type elem, int64_t groupSize, int64_t headDim,
                          int64_t valueDim, int64_t blockSize);
/// What queryGradInRegisters asks, as a diagnostic says it.
constexpr llvm::StringLiteral kRegisterQueryGradNeeds =
    "the register dq kernel needs G <= 16, d a multiple of 16 up to 128, dv "
    "a multiple of 32 up to 128, C of 16, 32 or 64 and 16-bit inputs";

/// Consecutive queries a block of the register dq kernel takes, a warp
/// each (as the forward's register kernel).
constexpr int64_t kRegisterGradQueries = 4;

/// The register dq kernel's shared memory: each warp's slot, its K tile
/// [C x d] then its Q tile [16 x d] (16-bit, rows padded by 8 elements for
/// ldmatrix), then each warp's list of attended blocks [K] (i32).
struct RegisterQueryGradPlan {
  int64_t headDim, valueDim, blockSize, topK;
  /// Bytes: the K tile's offset in a slot is 0, the Q tile's `queryOffset`;
  /// one slot, the lists' offset, one list, and the total.
  int64_t queryOffset, warpBytes, listOffset, listBytes, bytes;
  /// Entry j asks the L2 for entry j + prefetchEntries's K and V rows (0:
  /// none; kernel_config prefetch_ahead).
  int64_t prefetchEntries = 0;
  RegisterQueryGradPlan(int64_t headDim, int64_t valueDim, int64_t blockSize,
                        int64_t topK);
};

/// The register dq kernel's body (parameters as the staged query kernel's);
/// the launch has kRegisterGradQueries queries a block.
void buildRegisterQueryGrad(ImplicitLocOpBuilder &b, const Kernel &kernel,
                            const RegisterQueryGradPlan &plan,
                            int64_t groupSize, int64_t kvHeads, float scale);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_WARPQUERYGRAD_H
