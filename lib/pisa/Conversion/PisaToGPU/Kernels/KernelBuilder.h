//===- KernelBuilder.h - gpu.func kernels and their launches ----*- C++ -*-===//
//
// The pisa-to-gpu patterns build kernels directly as gpu.func in one
// gpu.module (@pisa_kernels) and launch them from the host function with
// gpu.launch_func on the kernel-level op's buffers.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_KERNELS_KERNELBUILDER_H
#define PISA_LIB_CONVERSION_PISATOGPU_KERNELS_KERNELBUILDER_H

#include "pisa/IR/PisaAttrs.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>
#include <utility>

namespace mlir::pisa::detail {

/// Scores are computed in base 2 (exp2 and log2 are single instructions):
/// logits are scaled by log2(e), LSEs taken back to base e with ln(2).
constexpr float kLog2E = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/// One kernel parameter: the name its body and its launches use, and its
/// type.
struct KernelParam {
  StringRef name;
  Type type;
};

/// A value passed to the kernel parameter `name` at a launch.
using KernelOperand = std::pair<StringRef, Value>;

/// A gpu.func kernel whose parameters are read and passed by name: its
/// signature is written once, where it is created, and no position is
/// written anywhere else.
class Kernel {
public:
  Kernel() = default;
  Kernel(gpu::GPUFuncOp func, ArrayRef<KernelParam> params);

  gpu::GPUFuncOp func() const { return fn; }
  explicit operator bool() const { return bool(fn); }
  /// The parameter `name` inside the kernel body (asserts it exists).
  Value arg(StringRef name) const;
  /// Whether the kernel has a parameter `name` (an optional operand's).
  bool has(StringRef name) const { return llvm::is_contained(names, name); }
  /// Launch operands in parameter order; each parameter exactly once
  /// (asserted).
  SmallVector<Value> operands(ArrayRef<KernelOperand> values) const;

private:
  unsigned indexOf(StringRef name) const;
  gpu::GPUFuncOp fn;
  SmallVector<std::string> names;
};

/// Creates `gpu.func @<name> kernel` (uniqued) at the end of
/// @pisa_kernels, creating the module and gpu.container_module as needed.
/// The builder is left at the start of the kernel body.
Kernel createKernel(PatternRewriter &rewriter, Operation *anchor,
                    StringRef name, ArrayRef<KernelParam> params,
                    TypeRange workgroup = {}, TypeRange privates = {});

/// createKernel with a parameter per launch operand, named and typed as
/// the operand: one list serves the kernel's creation and its launch.
Kernel createKernelFor(PatternRewriter &rewriter, Operation *anchor,
                       StringRef name, ArrayRef<KernelOperand> operands,
                       TypeRange workgroup = {}, TypeRange privates = {});

/// For a kernel-level op marked `token_major`: its queries, keys and
/// selection operands become [B, H, T, X] views (memref.transpose) of the
/// [B, T, H, X] buffers and the mark is dropped, so that its kernels are
/// built for the views' strided types and read the buffers in place.
void viewTokenMajorOperands(RewriterBase &rewriter, Operation *op);

/// Launches `kernel` over grid (gx, gy) x block (bx), its parameters
/// given by name, with `dynamicSharedBytes` of dynamic shared memory; a
/// grid sized at run time is skipped when empty.
void launch(ImplicitLocOpBuilder &b, const Kernel &kernel, Value gx, Value gy,
            int64_t bx, ArrayRef<KernelOperand> operands,
            int64_t dynamicSharedBytes = 0);

/// A precondition on sizes known only at run time (host side): a
/// cf.assert whose message names the op and the rule. pisa-compile checks
/// every such condition before a call enqueues anything and returns it as
/// the call's error.
void requireAtRuntime(ImplicitLocOpBuilder &b, Value cond,
                      const Twine &message);

/// Global thread coordinates inside a kernel.
Value blockIdX(ImplicitLocOpBuilder &b);
Value blockIdY(ImplicitLocOpBuilder &b);
Value threadIdX(ImplicitLocOpBuilder &b);

/// A thread's place in a kernel whose grid y is batch x KV head: its batch
/// and KV head, its thread, warp and lane, and the lane's mma accumulator
/// coordinates (g, i) = (lane / 4, lane % 4) (rows g and g + 8, columns
/// 2 i and 2 i + 1 of an m16n8 tile).
struct ThreadPlace {
  Value batch, kv, tid, warp, lane, gid, tig;
  ThreadPlace(ImplicitLocOpBuilder &b, int64_t kvHeads);
};

/// sm_90 shared memory: a block's static shared memory is at most 48 KiB;
/// an SM has 228 KiB, of which each resident block reserves 1 KiB.
constexpr int64_t kStaticSharedBytes = 48 * 1024;
/// How many blocks using `bytesPerBlock` of shared memory fit one SM.
constexpr int64_t blocksBySharedMemory(int64_t bytesPerBlock) {
  return (228 * 1024) / (bytesPerBlock + 1024);
}

/// Tells ptxas the block size and that `blocksPerSM` blocks should fit an
/// SM (known_block_size + nvvm.minctasm), so that it keeps registers within
/// that occupancy.
void setOccupancyHint(gpu::GPUFuncOp kernel, int64_t threads,
                      int64_t blocksPerSM);

/// setOccupancyHint with `config`'s threads and min_blocks_per_sm, when it
/// has one (the kernel_config of the op `kernel` is built for).
void applyOccupancyHint(gpu::GPUFuncOp kernel, KernelConfigAttr config);

/// A vector of `n` elements of `type` at `at` of `tile` (aligned to the
/// fragment's bytes, at most 16).
Value loadRow(ImplicitLocOpBuilder &b, Value tile, ValueRange at, int64_t n,
              Type type);
/// Stores the vector `v` at `at` of `tile`, aligned likewise.
void storeRow(ImplicitLocOpBuilder &b, Value v, Value tile, ValueRange at);
/// `v` (a vector of f32) in the element type of `memref`.
Value toElementsOf(ImplicitLocOpBuilder &b, Value v, Value memref);
/// The 1-D vectors `x` then `y` as one vector (a vector.shuffle, which lowers
/// to one LLVM shufflevector).
Value concatVectors(ImplicitLocOpBuilder &b, Value x, Value y);
/// An mma.sync operand fragment, vector<N x 2 x elem>, from N
/// vector<2 x elem> registers.
Value mmaFragment(ImplicitLocOpBuilder &b, ArrayRef<Value> pairs);
/// A paged key cache inside a kernel (docs/semantics.md, section 4): a pool
/// [P, S, H, d] read through a block table [B, Mp]. The one definition of
/// the page arithmetic for the append and the decode selection kernels.
struct PagedKeys {
  Value table, pool;
  int64_t pageSize;
  /// Indices of element `feature` of key j of sequence `batch`, head
  /// `head`: [table[batch, j / S], j % S, head, feature].
  SmallVector<Value> at(ImplicitLocOpBuilder &b, Value batch, Value j,
                        Value head, Value feature) const;
  /// The table entries that hold keys 0 .. n - 1, n clamped to [0,
  /// capacity] (a length that breaks its rule checks no page).
  Value pagesBelow(ImplicitLocOpBuilder &b, Value n, Value capacity) const;
  /// Whether entry i of sequence `batch` names a page outside [0,
  /// numPages) (numPages: the pool's dimension 0).
  Value outside(ImplicitLocOpBuilder &b, Value batch, Value i,
                Value numPages) const;
};

/// The constant `type` (a vector of f32) with every element `v`.
Value f32Splat(ImplicitLocOpBuilder &b, VectorType type, float v);

/// A warp tile product for --pisa-vector-to-mma-sync: `vector.contract`
/// (m, k) x rhs -> (m, n) accumulated onto `acc`, rhs (n, k) (a key tile)
/// or, with `rhsIsKN`, (k, n) (a value tile).
Value tileProduct(ImplicitLocOpBuilder &b, Value lhs, Value rhs, Value acc,
                  bool rhsIsKN);

/// log2 of an f32 scalar or vector as one MUFU instruction (`afn`: the NVVM
/// lowering takes __nv_fast_log2f, lg2.approx.f32, about 22 bits) instead
/// of libdevice's 30-instruction polynomial: the scorers' LSEs add it to a
/// row's max once per row, after exp2s of the same precision.
Value fastLog2(ImplicitLocOpBuilder &b, Value x);

/// exp2 of an f32 scalar or vector as `math.exp2 fastmath<afn>`, which
/// --pisa-fast-exp2-to-nvvm lowers to ex2.approx.ftz.f32 (one MUFU
/// instruction; plain math.exp2 becomes libdevice's ex2.approx.f32, which
/// ptxas wraps in a compare and two multiplies to return denormals): the
/// terms it flushes are below 2^-126 against a softmax's sum of at least 1
/// (its max's term).
Value fastExp2(ImplicitLocOpBuilder &b, Value x);

/// The constant vector<n x i32> [0, 1, ..., n - 1].
Value iotaI32(ImplicitLocOpBuilder &b, int64_t n);

/// `v` of lane (lane XOR mask) of the warp.
Value shuffleXor(ImplicitLocOpBuilder &b, Value v, int64_t mask);
/// `v` of lane `source` (an index value) of the warp.
Value shuffleFrom(ImplicitLocOpBuilder &b, Value v, Value source);

/// memref<shape x elem> in global memory (the default space).
MemRefType globalType(ArrayRef<int64_t> shape, Type elem);
/// memref<shape x elem, #gpu.address_space<private|workgroup>>.
MemRefType privateType(MLIRContext *ctx, ArrayRef<int64_t> shape, Type elem);
MemRefType workgroupType(MLIRContext *ctx, ArrayRef<int64_t> shape, Type elem);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_KERNELS_KERNELBUILDER_H
