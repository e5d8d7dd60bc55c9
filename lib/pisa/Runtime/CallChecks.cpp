//===- CallChecks.cpp - the checks around an entry point call -------------===//
//
// The runtime's half of EntryTable.h: what pisa-compile's wrapper calls
// around the lowered function (describe the arguments, refuse broken
// rules, check the workspace and context, end the call, validate the
// values that live on the device), and the recording of failures as
// statuses and messages. No C++ standard library, like the rest of the
// runtime.
//
//===----------------------------------------------------------------------===//

#include "CallState.h"
#include "InputRules.h"

#include "pisa/Runtime/EntryTable.h"
#include "pisa/Runtime/PisaRuntime.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utility>

using namespace pisa::runtime;

thread_local CallState pisa::runtime::call;

extern "C" {
/// This library's error slot for the calling thread. Every AOT library
/// exports one; all of them in a process use the first one the dynamic
/// linker can see (errorSlot), so that pisa_runtime_last_error, whichever
/// library's definition a program is bound to, reports the last failure of
/// any of them.
__attribute__((visibility("default"))) pisa::runtime::ErrorSlot *
pisa_runtime_error_slot_v1(void) {
  static thread_local pisa::runtime::ErrorSlot slot;
  return &slot;
}
}

pisa::runtime::ErrorSlot *pisa::runtime::errorSlot() {
  using SlotFn = ErrorSlot *(*)(void);
  // A plain static, not a guarded local: the libraries link without the
  // C++ runtime. Racing first calls store the same pointer.
  static SlotFn shared = nullptr;
  SlotFn found = __atomic_load_n(&shared, __ATOMIC_ACQUIRE);
  if (!found) {
    // Libraries loaded RTLD_LOCAL (ctypes' default) are not visible here:
    // each then keeps its own slot, which its own functions read.
    void *symbol = dlsym(RTLD_DEFAULT, "pisa_runtime_error_slot_v1");
    found =
        symbol ? reinterpret_cast<SlotFn>(symbol) : &pisa_runtime_error_slot_v1;
    __atomic_store_n(&shared, found, __ATOMIC_RELEASE);
  }
  return found();
}

namespace pisa::runtime {

void fail(const char *format, ...) {
  if (call.failed)
    return;
  va_list args;
  va_start(args, format);
  ErrorSlot *slot = errorSlot();
  vsnprintf(slot->text, sizeof(slot->text), format, args);
  va_end(args);
  slot->have = true;
  call.failed = true;
  if (call.error && call.errorBytes) {
    strncpy(call.error, slot->text, call.errorBytes - 1);
    call.error[call.errorBytes - 1] = '\0';
  }
}

bool check(CUresult result, const char *what) {
  if (result == CUDA_SUCCESS)
    return true;
  // A driver that cannot describe its own error (none installed, a stub)
  // still gets the call and the number into the message.
  const char *name = nullptr, *message = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS)
    name = nullptr;
  if (cuGetErrorString(result, &message) != CUDA_SUCCESS)
    message = nullptr;
  call.driverFailed = true;
  if (name && message)
    fail("%s%s failed: %s: %s", call.prefix, what, name, message);
  else
    fail("%s%s failed: CUDA error %d (the driver gives no description: is a "
         "CUDA driver installed and a GPU visible?)",
         call.prefix, what, int(result));
  return false;
}

bool currentContext(CUcontext *context, const char *function) {
  *context = nullptr;
  CUresult r = cuCtxGetCurrent(context);
  if (r == CUDA_ERROR_NOT_INITIALIZED) {
    if (!PISA_CHECK(cuInit(0)))
      return false;
    r = cuCtxGetCurrent(context);
  }
  if (!check(r, "cuCtxGetCurrent"))
    return false;
  if (!*context) {
    fail("%s%s%sno current CUDA context on this thread: make the device "
         "current first (cudaSetDevice, torch.cuda.set_device or "
         "cuCtxSetCurrent)",
         function ? "pisa_" : "", function ? function : "",
         function ? ": " : "");
    return false;
  }
  return true;
}

int reject(int status, const char *function, const char *format, ...) {
  char detail[400];
  va_list args;
  va_start(args, format);
  vsnprintf(detail, sizeof(detail), format, args);
  va_end(args);
  fail("pisa_%s: %s", function, detail);
  call.active = false;
  return status;
}

} // namespace pisa::runtime

extern "C" {

const char *pisa_runtime_last_error(void) {
  ErrorSlot *slot = errorSlot();
  return slot->have ? slot->text : nullptr;
}

void pisa_runtime_clear_error(void) { errorSlot()->have = false; }

/// Starts reporting for a call: its message buffer, cleared.
static bool openCall(const PisaCall *c, const char *function) {
  call = CallState();
  snprintf(call.prefix, sizeof(call.prefix), "pisa_%s: ", function);
  if (!c) {
    reject(PISA_ERROR_INVALID_ARGUMENT, function, "call is NULL");
    return false;
  }
  call.error = c->error;
  call.errorBytes = c->error_bytes;
  if (call.error && call.errorBytes)
    call.error[0] = '\0';
  return true;
}

/// 2^46 elements: 256 TiB of f32, more than any device holds.
constexpr int64_t kMaxTensorElements = int64_t(1) << 46;

/// Writes the descriptors of the memref arguments from the table and the
/// values (sizes after each pointer). Returns the index of the first
/// argument with a negative size or more than kMaxTensorElements elements,
/// or -1. The bound keeps every size the generated code derives from these
/// (strides, byte counts, the workspace) far from 2^63.
static int64_t writeDescriptors(const int64_t *table, void *const *values,
                                void *descriptors) {
  const int64_t numArgs = table[1];
  const int64_t *arg = table + kHeaderFields;
  char *out = static_cast<char *>(descriptors);
  int64_t v = 0;
  for (int64_t i = 0; i < numArgs; ++i, arg += kArgFields) {
    void *value = values[v++];
    if (arg[kKind] == kIndex)
      continue;
    const int64_t rank = arg[kRank];
    int64_t *d = reinterpret_cast<int64_t *>(out);
    d[0] = d[1] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(value));
    d[2] = 0;
    for (int64_t r = 0; r < rank; ++r) {
      int64_t size = arg[kSizes + r];
      if (size == kDynamicSize)
        size = static_cast<int64_t>(reinterpret_cast<intptr_t>(values[v++]));
      if (size < 0)
        return i;
      d[3 + r] = size;
    }
    int64_t elements = 1;
    for (int64_t r = 0; r < rank; ++r)
      if (__builtin_mul_overflow(elements, d[3 + r], &elements))
        return i;
    if (elements > kMaxTensorElements)
      return i;
    int64_t stride = 1;
    for (int64_t r = rank - 1; r >= 0; --r) {
      d[3 + rank + r] = stride;
      stride *= d[3 + r];
    }
    out += descriptorBytes(rank);
  }
  return -1;
}

/// Elements of the tensor described at `d` (rank `rank`).
static int64_t elementsOf(const int64_t *d, int64_t rank) {
  int64_t n = 1;
  for (int64_t r = 0; r < rank; ++r)
    n *= d[3 + r];
  return n;
}

/// The bytes one non-empty tensor of a call covers.
struct TensorSpan {
  int64_t arg;
  bool result;
  uintptr_t begin, end;
};

/// The non-empty tensors of a call in argument order, read from their
/// descriptors (writeDescriptors). A span past the end of the address
/// space has its end wrapped below its begin.
class SpanWalk {
public:
  SpanWalk(const int64_t *table, const void *descriptors)
      : table(table), arg(table + kHeaderFields),
        d(static_cast<const char *>(descriptors)) {}

  /// The next tensor's span into `span`; false after the last.
  bool next(TensorSpan &span) {
    for (; i < table[1]; ++i, arg += kArgFields) {
      if (arg[kKind] == kIndex)
        continue;
      const int64_t rank = arg[kRank];
      const int64_t *desc = reinterpret_cast<const int64_t *>(d);
      d += descriptorBytes(rank);
      const int64_t elements = elementsOf(desc, rank);
      if (elements == 0)
        continue;
      const uintptr_t begin = static_cast<uintptr_t>(desc[1]);
      span = {i, arg[kKind] == kResult, begin,
              begin + uint64_t(elements) * uint64_t(arg[kElementBytes])};
      ++i;
      arg += kArgFields;
      return true;
    }
    return false;
  }

private:
  const int64_t *table, *arg;
  const char *d;
  int64_t i = 0;
};

/// The first (result, other tensor) pair of the call whose bytes overlap,
/// or {-1, -1}: a kernel writing a result must not change another tensor
/// of the call (an input, or a result written in another order). Every
/// tensor takes part, read from the descriptors (no copy of them).
static std::pair<int64_t, int64_t> overlappingResult(const int64_t *table,
                                                     const void *descriptors) {
  TensorSpan a, b;
  for (SpanWalk outer(table, descriptors); outer.next(a);) {
    if (!a.result)
      continue;
    for (SpanWalk inner(table, descriptors); inner.next(b);)
      if (a.arg != b.arg && (b.arg > a.arg || !b.result) && a.begin < b.end &&
          b.begin < a.end)
        return {a.arg, b.arg};
  }
  return {-1, -1};
}

int pisaCallDescribe(const int64_t *table, const char *function,
                     const void *callArg, void *const *values,
                     void *descriptors) {
  const PisaCall *c = static_cast<const PisaCall *>(callArg);
  if (!openCall(c, function))
    return PISA_ERROR_INVALID_ARGUMENT;
  if (table[0] != kEntryTableVersion)
    return reject(PISA_ERROR_INVALID_ARGUMENT, function,
                  "entry table version %lld, runtime expects %lld",
                  (long long)table[0], (long long)kEntryTableVersion);
  int64_t bad = writeDescriptors(table, values, descriptors);
  if (bad >= 0)
    return reject(PISA_ERROR_INVALID_ARGUMENT, function,
                  "%s %lld has a negative size or more than 2^46 elements",
                  table[kHeaderFields + bad * kArgFields + kKind] == kResult
                      ? "result"
                      : "argument",
                  (long long)bad);
  const int64_t numArgs = table[1];
  const int64_t *arg = table + kHeaderFields;
  int64_t v = 0;
  // The non-empty tensors' spans, met in argument order (an empty tensor is
  // never read or written: any pointer will do).
  SpanWalk tensors(table, descriptors);
  TensorSpan span;
  bool more = tensors.next(span);
  for (int64_t i = 0; i < numArgs; ++i, arg += kArgFields) {
    uintptr_t value = reinterpret_cast<uintptr_t>(values[v++]);
    if (arg[kKind] == kIndex) {
      int64_t x = static_cast<int64_t>(value);
      if (x < arg[kLowest] || x > arg[kHighest])
        return reject(PISA_ERROR_INVALID_ARGUMENT, function,
                      "argument %lld is %lld, outside [%lld, %lld] (a query "
                      "offset must keep offset + queries <= keys)",
                      (long long)i, (long long)x, (long long)arg[kLowest],
                      (long long)arg[kHighest]);
      continue;
    }
    for (int64_t r = 0; r < arg[kRank]; ++r)
      v += arg[kSizes + r] == kDynamicSize;
    if (!more || span.arg != i)
      continue;
    const char *name = span.result ? "result" : "argument";
    if (!value)
      return reject(PISA_ERROR_INVALID_ARGUMENT, function, "%s %lld is NULL",
                    name, (long long)i);
    if (value % kTensorAlignment)
      return reject(PISA_ERROR_INVALID_ARGUMENT, function,
                    "%s %lld (%p) is not %lld-byte aligned", name, (long long)i,
                    reinterpret_cast<void *>(value),
                    (long long)kTensorAlignment);
    // The span's end wrapped past zero.
    if (span.end < span.begin)
      return reject(PISA_ERROR_INVALID_ARGUMENT, function,
                    "%s %lld (%p) ends past the end of the address space", name,
                    (long long)i, reinterpret_cast<void *>(value));
    more = tensors.next(span);
  }
  auto [result, other] = overlappingResult(table, descriptors);
  if (result >= 0)
    return reject(PISA_ERROR_INVALID_ARGUMENT, function,
                  "result %lld overlaps %s %lld: results are written in place "
                  "and must not share memory with another tensor of the call",
                  (long long)result,
                  table[kHeaderFields + other * kArgFields + kKind] == kResult
                      ? "result"
                      : "argument",
                  (long long)other);
  return PISA_OK;
}

int pisaCallSizes(const int64_t *table, void *const *values,
                  void *descriptors) {
  return writeDescriptors(table, values, descriptors) < 0 ? 0 : 1;
}

int pisaCallRefuse(const char *function, const void *callArg, const char *rules,
                   int64_t rule) {
  (void)callArg; // the message buffer was opened by pisaCallDescribe
  const char *text = rules;
  for (int64_t i = 1; i < rule && *text; ++i)
    text += strlen(text) + 1;
  return reject(PISA_ERROR_INVALID_ARGUMENT, function, "%s",
                *text ? text : "the sizes break one of the program's rules");
}

int pisaCallBegin(const char *function, const void *callArg, int64_t need) {
  const PisaCall *c = static_cast<const PisaCall *>(callArg);
  uintptr_t workspace = reinterpret_cast<uintptr_t>(c->workspace);
  // The size query returns -1 when the bytes overflow 64 bits.
  if (need < 0)
    return reject(PISA_ERROR_INVALID_ARGUMENT, function,
                  "these sizes need a workspace of more than 2^63 - 1 bytes");
  if (need > 0 && (!workspace || c->workspace_bytes < uint64_t(need)))
    return reject(PISA_ERROR_WORKSPACE, function,
                  "the workspace (%p, %zu bytes) is smaller than the %lld "
                  "bytes pisa_%s_workspace_size() returns for these sizes",
                  c->workspace, c->workspace_bytes, (long long)need, function);
  if (need > 0 && workspace % kWorkspaceAlignment)
    return reject(PISA_ERROR_WORKSPACE, function,
                  "the workspace (%p) is not %lld-byte aligned", c->workspace,
                  (long long)kWorkspaceAlignment);
  CUcontext context;
  if (!currentContext(&context, function)) {
    call.active = false;
    // A driver call that failed is a CUDA error; a thread without a
    // context is the caller's argument error.
    return call.driverFailed ? PISA_ERROR_CUDA : PISA_ERROR_INVALID_ARGUMENT;
  }
  call.active = true;
  call.stream = static_cast<CUstream>(c->stream);
  call.cursor = workspace;
  call.limit = workspace + (need > 0 ? c->workspace_bytes : 0);
  return PISA_OK;
}

int pisaCallEnd(void) {
  call.active = false;
  return call.failed ? PISA_ERROR_CUDA : PISA_OK;
}

/// The descriptor of argument `index` among those describe() wrote (index
/// arguments have none).
static const int64_t *descriptorOf(const int64_t *table,
                                   const void *descriptors, int64_t index) {
  const char *d = static_cast<const char *>(descriptors);
  const int64_t *arg = table + kHeaderFields;
  for (int64_t i = 0; i < index; ++i, arg += kArgFields)
    if (arg[kKind] != kIndex)
      d += descriptorBytes(arg[kRank]);
  return reinterpret_cast<const int64_t *>(d);
}

/// A host copy of the int32 tensor of `rank` described at `d` (dense, as
/// the entry's arguments are), read on the call's stream once the work
/// before it is done; nullptr on failure (recorded).
static int32_t *readBack(const int64_t *d, int64_t rank) {
  size_t elements = 1;
  for (int64_t r = 0; r < rank; ++r)
    elements *= size_t(d[3 + r]);
  const size_t bytes = elements * sizeof(int32_t);
  int32_t *host = static_cast<int32_t *>(malloc(bytes ? bytes : 1));
  if (!host) {
    fail("out of host memory reading cu_seqlens back");
    return nullptr;
  }
  if (!PISA_CHECK(
          cuMemcpyDtoHAsync(host, CUdeviceptr(d[1]), bytes, call.stream)) ||
      !PISA_CHECK(cuStreamSynchronize(call.stream))) {
    free(host);
    return nullptr;
  }
  return host;
}

int pisaCallValidate(const int64_t *table, const char *function,
                     const void *descriptors) {
  const int64_t numArgs = table[1];
  const int64_t *arg = table + kHeaderFields;
  // The first argument of each role, kept for the rules across two.
  constexpr int kNumRoles = kBlockTable + 1; // roles 1 .. kBlockTable
  int32_t *kept[kNumRoles] = {};
  int64_t entries[kNumRoles] = {};
  int64_t tableArg = -1; // the block table's argument
  int status = PISA_OK;
  char message[300];
  static const char *const kNames[kNumRoles] = {
      "",     "cu_seqlens_q", "cu_seqlens_k", "seq_lens",
      "from", "to",           "block_table"};
  for (int64_t i = 0; i < numArgs && status == PISA_OK;
       ++i, arg += kArgFields) {
    const int64_t roles = arg[kRoles];
    if (!roles)
      continue;
    const int64_t *d = descriptorOf(table, descriptors, i);
    int32_t *host = nullptr;
    bool keptHost = false;
    for (int role = 1; role < kNumRoles && status == PISA_OK; ++role) {
      if (!(roles & roleBit(ArgRole(role))))
        continue;
      const char *name = kNames[role];
      const bool cuSeqlens = role == kCuSeqlensQ || role == kCuSeqlensK;
      if (cuSeqlens && d[3] < 1) {
        status = reject(PISA_ERROR_INVALID_ARGUMENT, function,
                        "%s (argument %lld) is empty: it holds B + 1 entries",
                        name, (long long)i);
        break;
      }
      if (!host && !(host = readBack(d, arg[kRank]))) {
        status = PISA_ERROR_CUDA;
        break;
      }
      bool holds = true;
      if (role == kBlockTable) {
        tableArg = i; // checked below, against the lengths
      } else if (cuSeqlens) {
        int64_t rows = arg[kRowsArg] >= 0
                           ? descriptorOf(table, descriptors, arg[kRowsArg])[3]
                           : host[d[3] - 1];
        holds =
            checkCuSeqlens(name, host, d[3], rows, message, sizeof(message));
      } else if (role == kSeqLens) {
        // Nq: dimension 2 of the queries.
        int64_t numQueries =
            arg[kRowsArg] >= 0
                ? descriptorOf(table, descriptors, arg[kRowsArg])[3 + 2]
                : 1;
        holds = checkRange(name, host, d[3], numQueries, arg[kCapacity],
                           "Nq <= N_b <= the cache's capacity", message,
                           sizeof(message));
      } else {
        holds = checkRange(name, host, d[3], 0, arg[kCapacity],
                           "positions of the cache", message, sizeof(message));
      }
      if (!holds)
        status = reject(PISA_ERROR_INVALID_ARGUMENT, function,
                        "argument %lld: %s", (long long)i, message);
      if (!kept[role]) {
        kept[role] = host;
        entries[role] = d[3];
        keptHost = true;
      }
    }
    if (!keptHost)
      free(host);
  }
  if (status == PISA_OK && kept[kCuSeqlensQ] && kept[kCuSeqlensK] &&
      entries[kCuSeqlensQ] == entries[kCuSeqlensK] &&
      !checkQueriesFitKeys(kept[kCuSeqlensQ], kept[kCuSeqlensK],
                           entries[kCuSeqlensQ], message, sizeof(message)))
    status = reject(PISA_ERROR_INVALID_ARGUMENT, function, "%s", message);
  // A paged cache: its pages below each sequence's length (to for an
  // append, else seq_lens) in the pool, none named twice.
  const int32_t *lengths = kept[kAppendTo] ? kept[kAppendTo] : kept[kSeqLens];
  const int64_t numLengths =
      kept[kAppendTo] ? entries[kAppendTo] : entries[kSeqLens];
  if (status == PISA_OK && kept[kBlockTable] && lengths) {
    const int64_t *t = descriptorOf(table, descriptors, tableArg);
    const int64_t poolArg =
        table[kHeaderFields + tableArg * kArgFields + kRowsArg];
    if (poolArg >= 0) {
      const int64_t *pool = descriptorOf(table, descriptors, poolArg);
      const int64_t batch = t[3] < numLengths ? t[3] : numLengths;
      if (!checkBlockTable(kept[kBlockTable], batch, t[4], lengths, pool[4],
                           pool[3], message, sizeof(message)))
        status = reject(PISA_ERROR_INVALID_ARGUMENT, function,
                        "argument %lld: %s", (long long)tableArg, message);
    }
  }
  if (status == PISA_OK && kept[kAppendFrom] && kept[kAppendTo] &&
      entries[kAppendFrom] == entries[kAppendTo] &&
      !checkAppendOrder(kept[kAppendFrom], kept[kAppendTo],
                        entries[kAppendFrom], message, sizeof(message)))
    status = reject(PISA_ERROR_INVALID_ARGUMENT, function, "%s", message);
  // One argument may be kept for several roles: free each buffer once.
  for (int role = 0; role < kNumRoles; ++role) {
    bool earlier = false;
    for (int r = 0; r < role; ++r)
      earlier |= kept[r] == kept[role];
    if (!earlier)
      free(kept[role]);
  }
  if (status == PISA_OK && call.failed)
    status = PISA_ERROR_CUDA;
  return status;
}

} // extern "C"
