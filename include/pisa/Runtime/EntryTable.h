//===- EntryTable.h - what pisa-compile tells the runtime of an entry -*- C++
//-*-===//
//
// The one definition of the contract between the wrapper pisa-compile
// generates for each entry point and the runtime that checks its call:
// a constant int64 table per entry, and the two runtime functions the
// wrapper calls around the lowered function.
//
//   table[0] = kEntryTableVersion, table[1] = number of arguments (the
//   results last), table[2] = workspace bytes (kDynamicSize: computed per
//   call from the sizes), then kArgFields per argument: kind, rank, lowest
//   and highest value (index arguments), sizes[kMaxRank] (memrefs;
//   kDynamicSize for a size given at the call, unused sizes 0), roles (what
//   a validating call reads back: a mask of roleBit(ArgRole)), the
//   argument it refers to (-1:
//   none; for cu_seqlens, whose dimension 0 counts the rows it packs; for
//   seq_lens, the queries, whose dimension 2 is Nq; for a block table, the
//   page pool [P, S, Hkv, d]), the capacity Ncap that bounds seq_lens
//   and an append's from/to (0: none), and the bytes of an element
//   (memrefs; a result must not overlap another tensor of the call).
//
// The wrapper passes the C parameters in `values`, in order: each
// argument's value (a pointer, or an index as an integer) followed by the
// dynamic sizes of that argument; and a buffer that describe() fills with
// the arguments' memref descriptors, one after another, in MLIR's
// C-interface layout (allocated, aligned, offset, sizes[rank],
// strides[rank]).
//
// A call: describe() (pointers, ranges, sizes), the library's own checks
// of the sizes (refuse() with the failed rule's message), the workspace
// size for these sizes, begin() (workspace, context), the lowered
// function, end().
//
//===----------------------------------------------------------------------===//

#ifndef PISA_RUNTIME_ENTRYTABLE_H
#define PISA_RUNTIME_ENTRYTABLE_H

#include <stdint.h>

namespace pisa::runtime {

constexpr int64_t kEntryTableVersion = 4;
constexpr int64_t kDynamicSize = -1;
constexpr int64_t kHeaderFields = 3;
constexpr int64_t kMaxRank = 4;
constexpr int64_t kArgFields = 8 + kMaxRank;
enum ArgKind : int64_t { kInput = 0, kIndex = 1, kResult = 2 };
/// Inputs whose values (not only sizes) a validating call checks on the
/// host: the cu_seqlens of a varlen op (docs/semantics.md, section 7), the
/// seq_lens of pisa.decode_select and the from/to of pisa.pyramid_append
/// (section 4), and a paged cache's block table, whose pages below each
/// sequence's length (to, else seq_lens) must lie in the pool and belong to
/// one sequence position only.
enum ArgRole : int64_t {
  kNoRole = 0,
  kCuSeqlensQ = 1,
  kCuSeqlensK = 2,
  kSeqLens = 3,
  kAppendFrom = 4,
  kAppendTo = 5,
  kBlockTable = 6
};
/// The bit of `role` in an argument's kRoles mask (kNoRole: none).
constexpr int64_t roleBit(ArgRole role) {
  return role == kNoRole ? 0 : int64_t(1) << role;
}
enum ArgField : int64_t {
  kKind = 0,
  kRank = 1,
  kLowest = 2,
  kHighest = 3,
  kSizes = 4,
  kRoles = 4 + kMaxRank,
  kRowsArg = 5 + kMaxRank,
  kCapacity = 6 + kMaxRank,
  kElementBytes = 7 + kMaxRank
};
/// Workspace allocations are carved at this alignment.
constexpr int64_t kWorkspaceAlignment = 256;
/// Tensors must be aligned so: the kernels load 16-byte chunks.
constexpr int64_t kTensorAlignment = 16;

/// Bytes of a rank-r memref descriptor in the C interface.
constexpr int64_t descriptorBytes(int64_t rank) { return 8 * (3 + 2 * rank); }

inline int64_t alignWorkspace(int64_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment *
         kWorkspaceAlignment;
}

} // namespace pisa::runtime

extern "C" {
/// Checks a call's values against its table (null or misaligned tensors,
/// index ranges, negative sizes) and fills the descriptors. Returns a
/// PisaStatus; on failure the message is recorded and nothing enqueued.
int pisaCallDescribe(const int64_t *table, const char *function,
                     const void *call, void *const *values, void *descriptors);
/// Fills the descriptors from the sizes in `values` only (pointers may be
/// anything): for the workspace-size query. Returns 0, or 1 when a size is
/// negative.
int pisaCallSizes(const int64_t *table, void *const *values, void *descriptors);
/// Refuses a call whose sizes break the library's rule number `rule`
/// (1-based) of `rules` (NUL-separated messages): PISA_ERROR_INVALID_ARGUMENT.
int pisaCallRefuse(const char *function, const void *call, const char *rules,
                   int64_t rule);
/// Checks the workspace (`bytes` needed) and the context and makes the call
/// current on this thread (stream, workspace). Returns a PisaStatus.
int pisaCallBegin(const char *function, const void *call, int64_t bytes);
/// Ends the current call: PISA_OK, or the first driver failure since begin.
int pisaCallEnd(void);
/// For pisa_F_validate, after begin: reads the call's cu_seqlens, seq_lens
/// and from/to arguments back (waiting for the call's stream) and checks
/// the rules that only their values decide. Returns a PisaStatus; enqueues no
/// kernel and writes no argument.
int pisaCallValidate(const int64_t *table, const char *function,
                     const void *descriptors);
}

#endif // PISA_RUNTIME_ENTRYTABLE_H
