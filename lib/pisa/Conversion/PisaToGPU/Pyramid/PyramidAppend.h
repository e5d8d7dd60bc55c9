//===- PyramidAppend.h - The pyramid append as a kernel body ----*- C++ -*-===//
//
// pisa.kernel.pyramid_append is a block per (batch, KV head). Its body is
// emitted by one function, for the append's own kernel and for a decode
// step's selection kernel that runs the append first
// (pisa.kernel.append_select_single_stage, made by --pisa-fuse-decode-append:
// one launch instead of two, docs/gpu.md, "A decode step in one kernel").
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_PYRAMID_PYRAMIDAPPEND_H
#define PISA_LIB_CONVERSION_PISATOGPU_PYRAMID_PYRAMIDAPPEND_H

#include "pisa/IR/PisaOps.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::pisa::detail {

/// The append's buffers inside a kernel: keys [B, Hkv, Ncap, d] (or a page
/// pool [P, S, Hkv, d] read through blockTable [B, Mp]), from and to [B]
/// i32, the cache; pageFlag is an i32 [1] workgroup buffer, with a table.
struct AppendOperands {
  Value keys, from, to, pyramid;
  Value blockTable = nullptr, pageFlag = nullptr;
};

/// Block (query, batch x head) of `threads` threads (a multiple of d)
/// brings the cache of sequence `batch` from from[b] to to[b] keys. Rows
/// of the cache follow the capacity's layout (Ncap = the keys' dimension 2,
/// or Mp x S for a page pool); node counts follow to[b]. The threads split
/// the nodes of a level (rows of d features), a barrier between levels; an
/// append within the last leaf updates its path in registers (row 0's
/// threads; 32 of the leaf's keys in flight in a block of at most 512
/// threads, 16 in a larger one, as their registers allow). An invalid range
/// (not 0 <= from < to <= Ncap, or a page outside the pool) leaves the
/// cache as it is. Every thread of the block must run it.
void emitPyramidAppend(ImplicitLocOpBuilder &b, const AppendOperands &ops,
                       int64_t blockSize, int64_t fan, int64_t threads);

/// Threads of pisa.kernel.pyramid_append's block: rows of d, as many as
/// 1024 threads hold.
int64_t pyramidAppendThreads(int64_t headDim);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_PYRAMID_PYRAMIDAPPEND_H
