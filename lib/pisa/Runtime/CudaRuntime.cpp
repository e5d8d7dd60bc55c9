//===- CudaRuntime.cpp - mgpu* ABI over the CUDA driver API ---------------===//
//
// What host code lowered by gpu-to-llvm calls (module load, kernel launch,
// streams, memory); the checks around each entry point call are in
// CallChecks.cpp. No C++ standard library, so that an AOT library needs
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

#include "CallState.h"

#include "pisa/Runtime/EntryTable.h"

#include <cuda.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

using namespace pisa::runtime;

namespace {

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
/// each time were host work a short call could not hide.
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
  if (!PISA_CHECK(cuModuleLoadData(&module, lazy->image))) {
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
    else if (!kernel && PISA_CHECK(cuModuleGetFunction(
                            &function, lazy->modules[slot], name))) {
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
    ok = PISA_CHECK(cuFuncSetAttribute(
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

} // namespace

extern "C" {

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
    PISA_CHECK(cuLaunchKernel(kernel->function, gridX, gridY, gridZ, blockX,
                              blockY, blockZ, smem, stream, nullptr, extra));
    return;
  }
  PISA_CHECK(cuLaunchKernel(kernel->function, gridX, gridY, gridZ, blockX,
                            blockY, blockZ, smem, stream, params, nullptr));
}

//===----------------------------------------------------------------------===//
// Streams and events: the caller's stream, created, synchronised and
// destroyed by the caller. Work on it stays stream-ordered.
//===----------------------------------------------------------------------===//

CUstream mgpuStreamCreate() { return call.stream; }

void mgpuStreamDestroy(CUstream) {}

void mgpuStreamSynchronize(CUstream) {}

void mgpuStreamWaitEvent(CUstream stream, CUevent event) {
  PISA_CHECK(cuStreamWaitEvent(stream, event, 0));
}

CUevent mgpuEventCreate() {
  CUevent event = nullptr;
  PISA_CHECK(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
  return event;
}

void mgpuEventDestroy(CUevent event) { PISA_CHECK(cuEventDestroy(event)); }

void mgpuEventSynchronize(CUevent event) {
  PISA_CHECK(cuEventSynchronize(event));
}

void mgpuEventRecord(CUevent event, CUstream stream) {
  PISA_CHECK(cuEventRecord(event, stream));
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
    PISA_CHECK(cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                             reinterpret_cast<CUdeviceptr>(src), sizeBytes,
                             stream));
}

void mgpuMemset32(void *dst, unsigned int value, size_t count,
                  CUstream stream) {
  if (!call.failed && count)
    PISA_CHECK(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(dst), value,
                                count, stream));
}

void mgpuMemset16(void *dst, unsigned short value, size_t count,
                  CUstream stream) {
  if (!call.failed && count)
    PISA_CHECK(cuMemsetD16Async(reinterpret_cast<CUdeviceptr>(dst), value,
                                count, stream));
}

void mgpuSetDefaultDevice(int32_t) {}

} // extern "C"
