//===- CudaRuntime.cpp - mgpu* ABI over the CUDA driver API ---------------===//
//
// What host code lowered by gpu-to-llvm calls (module load, kernel launch,
// streams, memory), and the checks around each entry point call
// (EntryTable.h). No C++ standard library, so that an AOT library needs
// nothing but libcuda and libc at run time.
//
// A call's state is thread-local: the caller's stream, its workspace and
// the first driver failure. Every mgpu* operation of the call runs on the
// caller's stream (never a private stream: one that does not wait for the
// caller's stream reads inputs the caller has not finished writing, issue
// 11's wrong rows); device memory is carved from the caller's workspace,
// so a call allocates nothing and never synchronises.
//
// Modules load lazily, once per CUDA context, on first use in a call: the
// library's global constructor only records the image, and a call runs in
// whatever context is current on the calling thread.
//
//===----------------------------------------------------------------------===//

#include "InputRules.h"

#include "pisa/Runtime/EntryTable.h"
#include "pisa/Runtime/PisaRuntime.h"

#include <cuda.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

using namespace pisa::runtime;

namespace {

struct CallState {
  bool active = false;
  CUstream stream = nullptr;
  uintptr_t cursor = 0, limit = 0; ///< the workspace still free
  bool failed = false;
  char *error = nullptr; ///< the caller's message buffer
  size_t errorBytes = 0;
};

thread_local CallState call;
thread_local char lastError[512];
thread_local bool haveError = false;

/// Records the first failure of this thread's call (or outside a call) and
/// copies it to the caller's buffer. Nothing is printed.
void fail(const char *format, ...) {
  if (call.failed)
    return;
  va_list args;
  va_start(args, format);
  vsnprintf(lastError, sizeof(lastError), format, args);
  va_end(args);
  haveError = true;
  call.failed = true;
  if (call.error && call.errorBytes) {
    strncpy(call.error, lastError, call.errorBytes - 1);
    call.error[call.errorBytes - 1] = '\0';
  }
}

bool check(CUresult result, const char *what) {
  if (result == CUDA_SUCCESS)
    return true;
  const char *name = "?", *message = "?";
  cuGetErrorName(result, &name);
  cuGetErrorString(result, &message);
  fail("%s: %s: %s", what, name, message);
  return false;
}

#define CHECK(call) check((call), #call)

/// The calling thread's current context; never replaced or created here.
/// Failures name `function` (the entry point) when given.
bool currentContext(CUcontext *context, const char *function = nullptr) {
  *context = nullptr;
  CUresult r = cuCtxGetCurrent(context);
  if (r == CUDA_ERROR_NOT_INITIALIZED) {
    if (!CHECK(cuInit(0)))
      return false;
    r = cuCtxGetCurrent(context);
  }
  if (!CHECK(r))
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

//===----------------------------------------------------------------------===//
// Lazily loaded modules
//===----------------------------------------------------------------------===//

constexpr int kMaxContexts = 64;
/// Kernels of one module; pisa's programs have about a dozen.
constexpr int kMaxKernels = 64;
/// Launches with at most this many parameters, of at most kMaxParamBytes
/// together, are packed into one buffer.
constexpr int kMaxPackedParams = 160;
constexpr size_t kMaxParamBytes = 4096;

struct LazyModule;

/// What mgpuModuleGetFunction hands the host code, which passes it on to
/// mgpuLaunchKernel untouched: a kernel of a module in one context, found
/// by name once (the host code's constant string, so its address names
/// it). The host code asks for its kernel before every launch, and a
/// driver lookup, a shared memory attribute and a per-parameter launch
/// each time were host work a short call could not hide (issue 12, item 7).
struct KernelRecord {
  const char *name;
  CUfunction function;
  LazyModule *owner;
  /// The dynamic shared memory limit the kernel was raised to.
  int32_t sharedAllowed;
  /// kUnknownLayout until the first launch; then the parameter count whose
  /// offsets and sizes are below, or kUnpacked (too many, too large, or a
  /// driver without cuFuncGetParamInfo: the parameters go one by one).
  int numParams;
  uint16_t offsets[kMaxPackedParams], sizes[kMaxPackedParams];
  size_t paramBytes;
};
constexpr int kUnknownLayout = -1, kUnpacked = -2;

struct LazyModule {
  const void *image;
  pthread_mutex_t lock;
  int count;
  CUcontext contexts[kMaxContexts];
  CUmodule modules[kMaxContexts];
  int numKernels[kMaxContexts];
  KernelRecord *kernels[kMaxContexts]; ///< kMaxKernels each
};

/// The index of `lazy`'s module in the current context, loaded on first
/// use; -1 on failure. Called with the lock held.
int moduleSlot(LazyModule *lazy, CUcontext context) {
  for (int i = 0; i < lazy->count; ++i)
    if (lazy->contexts[i] == context)
      return i;
  if (lazy->count == kMaxContexts) {
    fail("the kernels are loaded in %d CUDA contexts already", kMaxContexts);
    return -1;
  }
  KernelRecord *kernels =
      static_cast<KernelRecord *>(calloc(kMaxKernels, sizeof(KernelRecord)));
  if (!kernels) {
    fail("out of host memory loading the kernels");
    return -1;
  }
  CUmodule module = nullptr;
  if (!CHECK(cuModuleLoadData(&module, lazy->image))) {
    free(kernels);
    return -1;
  }
  lazy->contexts[lazy->count] = context;
  lazy->modules[lazy->count] = module;
  lazy->numKernels[lazy->count] = 0;
  lazy->kernels[lazy->count] = kernels;
  return lazy->count++;
}

/// Kernel `name` of `lazy` in the current context, looked up once.
KernelRecord *kernelForCurrentContext(LazyModule *lazy, const char *name) {
  CUcontext context;
  if (!lazy || !currentContext(&context))
    return nullptr;
  KernelRecord *kernel = nullptr;
  pthread_mutex_lock(&lazy->lock);
  int slot = moduleSlot(lazy, context);
  if (slot >= 0) {
    KernelRecord *kernels = lazy->kernels[slot];
    int &count = lazy->numKernels[slot];
    for (int i = 0; i < count && !kernel; ++i)
      if (kernels[i].name == name)
        kernel = &kernels[i];
    CUfunction function = nullptr;
    if (!kernel && count == kMaxKernels)
      fail("the module has more than %d kernels", kMaxKernels);
    else if (!kernel &&
             CHECK(cuModuleGetFunction(&function, lazy->modules[slot], name))) {
      kernel = &kernels[count++];
      *kernel = KernelRecord();
      kernel->name = name;
      kernel->function = function;
      kernel->owner = lazy;
      kernel->numParams = kUnknownLayout;
    }
  }
  pthread_mutex_unlock(&lazy->lock);
  return kernel;
}

/// Raises `kernel`'s dynamic shared memory limit to `bytes` unless it is
/// there already.
bool allowDynamicShared(KernelRecord *kernel, int32_t bytes) {
  if (__atomic_load_n(&kernel->sharedAllowed, __ATOMIC_ACQUIRE) >= bytes)
    return true;
  bool ok = true;
  pthread_mutex_lock(&kernel->owner->lock);
  if (kernel->sharedAllowed < bytes) {
    ok = CHECK(cuFuncSetAttribute(
        kernel->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        bytes));
    if (ok)
      __atomic_store_n(&kernel->sharedAllowed, bytes, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&kernel->owner->lock);
  return ok;
}

/// The kernel's parameter layout for a launch of `count` parameters, asked
/// of the driver on the first launch: `count` when known, else kUnpacked.
int parameterLayout(KernelRecord *kernel, int count) {
  int known = __atomic_load_n(&kernel->numParams, __ATOMIC_ACQUIRE);
  if (known != kUnknownLayout)
    return known;
  pthread_mutex_lock(&kernel->owner->lock);
  if (kernel->numParams == kUnknownLayout) {
    int layout = count <= kMaxPackedParams ? count : kUnpacked;
    size_t end = 0;
    for (int i = 0; i < count && layout != kUnpacked; ++i) {
      size_t offset = 0, size = 0;
      // Not CHECK: a driver without it is no failure, only unpacked.
      if (cuFuncGetParamInfo(kernel->function, i, &offset, &size) !=
              CUDA_SUCCESS ||
          offset + size > kMaxParamBytes) {
        layout = kUnpacked;
        break;
      }
      kernel->offsets[i] = uint16_t(offset);
      kernel->sizes[i] = uint16_t(size);
      end = offset + size > end ? offset + size : end;
    }
    kernel->paramBytes = end;
    __atomic_store_n(&kernel->numParams, layout, __ATOMIC_RELEASE);
  }
  int layout = kernel->numParams;
  pthread_mutex_unlock(&kernel->owner->lock);
  return layout;
}

//===----------------------------------------------------------------------===//
// Checking a call (EntryTable.h)
//===----------------------------------------------------------------------===//

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

} // namespace

extern "C" {

const char *pisa_runtime_last_error(void) {
  return haveError ? lastError : nullptr;
}

void pisa_runtime_clear_error(void) { haveError = false; }

/// Starts reporting for a call: its message buffer, cleared.
static bool openCall(const PisaCall *c, const char *function) {
  call = CallState();
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

/// Writes the descriptors of the memref arguments from the table and the
/// values (sizes after each pointer). Returns the index of the first
/// argument with a negative size, or -1.
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
                  "%s %lld has a negative size",
                  table[kHeaderFields + bad * kArgFields + kKind] == kResult
                      ? "result"
                      : "argument",
                  (long long)bad);
  const int64_t numArgs = table[1];
  const int64_t *arg = table + kHeaderFields;
  const char *d = static_cast<const char *>(descriptors);
  int64_t v = 0;
  for (int64_t i = 0; i < numArgs; ++i, arg += kArgFields) {
    const char *name = arg[kKind] == kResult ? "result" : "argument";
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
    const int64_t rank = arg[kRank];
    for (int64_t r = 0; r < rank; ++r)
      v += arg[kSizes + r] == kDynamicSize;
    // An empty tensor is never read or written: any pointer will do.
    bool empty = elementsOf(reinterpret_cast<const int64_t *>(d), rank) == 0;
    d += descriptorBytes(rank);
    if (empty)
      continue;
    if (!value)
      return reject(PISA_ERROR_INVALID_ARGUMENT, function,
                    "%s %lld is NULL", name, (long long)i);
    if (value % kTensorAlignment)
      return reject(PISA_ERROR_INVALID_ARGUMENT, function,
                    "%s %lld (%p) is not %lld-byte aligned", name,
                    (long long)i, reinterpret_cast<void *>(value),
                    (long long)kTensorAlignment);
  }
  return PISA_OK;
}

int pisaCallSizes(const int64_t *table, void *const *values,
                  void *descriptors) {
  return writeDescriptors(table, values, descriptors) < 0 ? 0 : 1;
}

int pisaCallRefuse(const char *function, const void *callArg,
                   const char *rules, int64_t rule) {
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
    return PISA_ERROR_INVALID_ARGUMENT;
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

/// A host copy of the int32 vector described at `d`, read on the call's
/// stream once the work before it is done; nullptr on failure (recorded).
static int32_t *readBack(const int64_t *d) {
  const size_t bytes = size_t(d[3]) * sizeof(int32_t);
  int32_t *host = static_cast<int32_t *>(malloc(bytes ? bytes : 1));
  if (!host) {
    fail("out of host memory reading cu_seqlens back");
    return nullptr;
  }
  if (!CHECK(cuMemcpyDtoHAsync(host, CUdeviceptr(d[1]), bytes, call.stream)) ||
      !CHECK(cuStreamSynchronize(call.stream))) {
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
  constexpr int kRoles = kAppendTo + 1;
  int32_t *kept[kRoles] = {};
  int64_t entries[kRoles] = {};
  int status = PISA_OK;
  char message[300];
  static const char *const kNames[kRoles] = {
      "", "cu_seqlens_q", "cu_seqlens_k", "seq_lens", "from", "to"};
  for (int64_t i = 0; i < numArgs && status == PISA_OK; ++i, arg += kArgFields) {
    const int64_t role = arg[kRole];
    if (role <= kNoRole || role >= kRoles)
      continue;
    const char *name = kNames[role];
    const int64_t *d = descriptorOf(table, descriptors, i);
    const bool cuSeqlens = role == kCuSeqlensQ || role == kCuSeqlensK;
    if (cuSeqlens && d[3] < 1) {
      status = reject(PISA_ERROR_INVALID_ARGUMENT, function,
                      "%s (argument %lld) is empty: it holds B + 1 entries",
                      name, (long long)i);
      break;
    }
    int32_t *host = readBack(d);
    if (!host) {
      status = PISA_ERROR_CUDA;
      break;
    }
    bool holds = true;
    if (cuSeqlens) {
      int64_t rows = arg[kRowsArg] >= 0
                         ? descriptorOf(table, descriptors, arg[kRowsArg])[3]
                         : host[d[3] - 1];
      holds = checkCuSeqlens(name, host, d[3], rows, message, sizeof(message));
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
    } else {
      free(host);
    }
  }
  if (status == PISA_OK && kept[kCuSeqlensQ] && kept[kCuSeqlensK] &&
      entries[kCuSeqlensQ] == entries[kCuSeqlensK] &&
      !checkQueriesFitKeys(kept[kCuSeqlensQ], kept[kCuSeqlensK],
                           entries[kCuSeqlensQ], message, sizeof(message)))
    status = reject(PISA_ERROR_INVALID_ARGUMENT, function, "%s", message);
  if (status == PISA_OK && kept[kAppendFrom] && kept[kAppendTo] &&
      entries[kAppendFrom] == entries[kAppendTo] &&
      !checkAppendOrder(kept[kAppendFrom], kept[kAppendTo],
                        entries[kAppendFrom], message, sizeof(message)))
    status = reject(PISA_ERROR_INVALID_ARGUMENT, function, "%s", message);
  for (int32_t *host : kept)
    free(host);
  if (status == PISA_OK && call.failed)
    status = PISA_ERROR_CUDA;
  return status;
}

//===----------------------------------------------------------------------===//
// Modules and launches
//===----------------------------------------------------------------------===//

// Called from the library's global constructor: records the image only.
void *mgpuModuleLoad(void *data, size_t /*gpuBlobSize*/) {
  LazyModule *lazy = static_cast<LazyModule *>(calloc(1, sizeof(LazyModule)));
  if (!lazy)
    return nullptr;
  lazy->image = data;
  pthread_mutex_init(&lazy->lock, nullptr);
  return lazy;
}

void *mgpuModuleLoadJIT(void *data, int /*optLevel*/) {
  return mgpuModuleLoad(data, 0);
}

// Called from the library's global destructor. A context may already be
// gone at process exit, which is not worth reporting.
void mgpuModuleUnload(void *handle) {
  LazyModule *lazy = static_cast<LazyModule *>(handle);
  if (!lazy)
    return;
  for (int i = 0; i < lazy->count; ++i) {
    (void)cuModuleUnload(lazy->modules[i]);
    free(lazy->kernels[i]);
  }
  pthread_mutex_destroy(&lazy->lock);
  free(lazy);
}

// A KernelRecord in place of the CUfunction: the host code only passes it
// to mgpuLaunchKernel.
CUfunction mgpuModuleGetFunction(void *handle, const char *name) {
  return reinterpret_cast<CUfunction>(
      kernelForCurrentContext(static_cast<LazyModule *>(handle), name));
}

void mgpuLaunchKernel(CUfunction handle, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, CUstream stream,
                      void **params, void ** /*extra*/, size_t count) {
  KernelRecord *kernel = reinterpret_cast<KernelRecord *>(handle);
  if (!kernel || call.failed)
    return;
  if (smem > 0 && !allowDynamicShared(kernel, smem))
    return;
  // One buffer of the parameters, laid out as the kernel expects: the
  // driver copies it whole instead of walking the parameters.
  if (count > 0 && parameterLayout(kernel, int(count)) == int(count)) {
    alignas(16) char buffer[kMaxParamBytes];
    for (size_t i = 0; i < count; ++i)
      memcpy(buffer + kernel->offsets[i], params[i], kernel->sizes[i]);
    size_t bytes = kernel->paramBytes;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer,
                     CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes, CU_LAUNCH_PARAM_END};
    CHECK(cuLaunchKernel(kernel->function, gridX, gridY, gridZ, blockX, blockY,
                         blockZ, smem, stream, nullptr, extra));
    return;
  }
  CHECK(cuLaunchKernel(kernel->function, gridX, gridY, gridZ, blockX, blockY,
                       blockZ, smem, stream, params, nullptr));
}

//===----------------------------------------------------------------------===//
// Streams and events: the caller's stream, created, synchronised and
// destroyed by the caller. Work on it stays stream-ordered.
//===----------------------------------------------------------------------===//

CUstream mgpuStreamCreate() { return call.stream; }

void mgpuStreamDestroy(CUstream) {}

void mgpuStreamSynchronize(CUstream) {}

void mgpuStreamWaitEvent(CUstream stream, CUevent event) {
  CHECK(cuStreamWaitEvent(stream, event, 0));
}

CUevent mgpuEventCreate() {
  CUevent event = nullptr;
  CHECK(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
  return event;
}

void mgpuEventDestroy(CUevent event) { CHECK(cuEventDestroy(event)); }

void mgpuEventSynchronize(CUevent event) { CHECK(cuEventSynchronize(event)); }

void mgpuEventRecord(CUevent event, CUstream stream) {
  CHECK(cuEventRecord(event, stream));
}

//===----------------------------------------------------------------------===//
// Memory: carved from the call's workspace; freeing is a no-op.
//===----------------------------------------------------------------------===//

void *mgpuMemAlloc(uint64_t sizeBytes, CUstream, bool isHostShared) {
  if (sizeBytes == 0)
    return nullptr;
  if (!call.active || isHostShared) {
    fail("device memory requested outside the library's workspace");
    return nullptr;
  }
  uintptr_t ptr = call.cursor;
  uint64_t rounded = uint64_t(alignWorkspace(int64_t(sizeBytes)));
  if (rounded > call.limit - call.cursor) {
    fail("the workspace is exhausted: pisa-compile's workspace size does "
         "not cover this call (please report)");
    return nullptr;
  }
  call.cursor += rounded;
  return reinterpret_cast<void *>(ptr);
}

void mgpuMemFree(void *, CUstream) {}

void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, CUstream stream) {
  if (!call.failed && sizeBytes)
    CHECK(cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                        reinterpret_cast<CUdeviceptr>(src), sizeBytes, stream));
}

void mgpuMemset32(void *dst, unsigned int value, size_t count,
                  CUstream stream) {
  if (!call.failed && count)
    CHECK(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                           stream));
}

void mgpuMemset16(void *dst, unsigned short value, size_t count,
                  CUstream stream) {
  if (!call.failed && count)
    CHECK(cuMemsetD16Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                           stream));
}

void mgpuSetDefaultDevice(int32_t) {}

} // extern "C"
