//===- CudaRuntime.cpp - mgpu* ABI over the CUDA driver API ---------------===//
//
// What host code lowered by gpu-to-llvm calls: module load, kernel launch,
// streams, events, memory. Every driver call is checked; the first failure
// is printed once with the driver's name and message and kept for
// pisa_runtime_last_error(). No C++ standard library, so that an AOT
// library needs nothing but libcuda and libc at run time.
//
// Every call runs on the caller's stream (pisa_runtime_set_stream; NULL,
// the legacy default stream, unless set) and returns once its work is
// enqueued. Never a private stream: one that does not wait for the
// caller's stream reads inputs the caller has not finished writing (issue
// 11's wrong rows, on PyTorch's default stream).
//
// Device memory comes from the stream-ordered pool (cuMemAllocAsync), whose
// release threshold is raised so that per-call scratch buffers are reused
// instead of returned to the driver.
//
//===----------------------------------------------------------------------===//

#include "pisa/Runtime/PisaRuntime.h"

#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

namespace {

char lastError[512];
bool haveError = false;
CUcontext context = nullptr;
CUstream userStream = nullptr;
bool poolConfigured = false;

bool check(CUresult result, const char *call) {
  if (result == CUDA_SUCCESS)
    return true;
  const char *name = "?", *message = "?";
  cuGetErrorName(result, &name);
  cuGetErrorString(result, &message);
  if (!haveError) {
    snprintf(lastError, sizeof(lastError), "%s: %s: %s", call, name, message);
    haveError = true;
    fprintf(stderr, "pisa runtime: %s\n", lastError);
  }
  return false;
}

#define CHECK(call) check((call), #call)

/// Binds the device's primary context (shared with PyTorch and the CUDA
/// runtime) to the calling thread.
bool ensureContext() {
  if (context)
    return CHECK(cuCtxSetCurrent(context));
  if (!CHECK(cuInit(0)))
    return false;
  CUdevice device;
  if (!CHECK(cuDeviceGet(&device, 0)) ||
      !CHECK(cuDevicePrimaryCtxRetain(&context, device)))
    return false;
  return CHECK(cuCtxSetCurrent(context));
}

void configurePool() {
  if (poolConfigured)
    return;
  poolConfigured = true;
  CUdevice device;
  CUmemoryPool pool;
  if (!CHECK(cuCtxGetDevice(&device)) ||
      !CHECK(cuDeviceGetDefaultMemPool(&pool, device)))
    return;
  uint64_t threshold = UINT64_MAX;
  CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                              &threshold));
}

} // namespace

extern "C" {

const char *pisa_runtime_last_error(void) {
  return haveError ? lastError : nullptr;
}

void pisa_runtime_clear_error(void) { haveError = false; }

void pisa_runtime_free(void *ptr) {
  // Ordered after the reads the caller has enqueued on its stream.
  if (ptr && ensureContext())
    CHECK(cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(ptr), userStream));
}

void pisa_runtime_set_stream(void *stream) {
  userStream = static_cast<CUstream>(stream);
}

//===----------------------------------------------------------------------===//
// Modules and launches
//===----------------------------------------------------------------------===//

CUmodule mgpuModuleLoad(void *data, size_t /*gpuBlobSize*/) {
  CUmodule module = nullptr;
  if (ensureContext())
    CHECK(cuModuleLoadData(&module, data));
  return module;
}

CUmodule mgpuModuleLoadJIT(void *data, int optLevel) {
  CUmodule module = nullptr;
  if (!ensureContext())
    return module;
  CUjit_option options[] = {CU_JIT_OPTIMIZATION_LEVEL};
  void *values[] = {reinterpret_cast<void *>(intptr_t(optLevel))};
  CHECK(cuModuleLoadDataEx(&module, data, 1, options, values));
  return module;
}

void mgpuModuleUnload(CUmodule module) {
  // Runs from a global destructor: the context may already be gone at
  // process exit, which is not an error worth reporting.
  if (module && context)
    (void)cuModuleUnload(module);
}

CUfunction mgpuModuleGetFunction(CUmodule module, const char *name) {
  CUfunction function = nullptr;
  if (module)
    CHECK(cuModuleGetFunction(&function, module, name));
  return function;
}

void mgpuLaunchKernel(CUfunction function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, CUstream stream,
                      void **params, void ** /*extra*/, size_t /*count*/) {
  if (!function || !ensureContext())
    return;
  if (smem > 0 && !CHECK(cuFuncSetAttribute(
                      function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                      smem)))
    return;
  CHECK(cuLaunchKernel(function, gridX, gridY, gridZ, blockX, blockY, blockZ,
                       smem, stream, params, nullptr));
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

// The host code's "stream" is the caller's: created, synchronized and
// destroyed by the caller, not by a call. Work on it stays stream-ordered,
// like any library call on a stream: the caller orders its reads after it
// and waits when it needs to.
CUstream mgpuStreamCreate() {
  ensureContext();
  return userStream;
}

void mgpuStreamDestroy(CUstream) {}

void mgpuStreamSynchronize(CUstream) {}

void mgpuStreamWaitEvent(CUstream stream, CUevent event) {
  CHECK(cuStreamWaitEvent(stream, event, 0));
}

CUevent mgpuEventCreate() {
  CUevent event = nullptr;
  if (ensureContext())
    CHECK(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
  return event;
}

void mgpuEventDestroy(CUevent event) { CHECK(cuEventDestroy(event)); }

void mgpuEventSynchronize(CUevent event) { CHECK(cuEventSynchronize(event)); }

void mgpuEventRecord(CUevent event, CUstream stream) {
  CHECK(cuEventRecord(event, stream));
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

void *mgpuMemAlloc(uint64_t sizeBytes, CUstream stream, bool isHostShared) {
  if (!ensureContext())
    return nullptr;
  CUdeviceptr ptr = 0;
  if (sizeBytes == 0)
    return nullptr;
  if (isHostShared) {
    CHECK(cuMemAllocManaged(&ptr, sizeBytes, CU_MEM_ATTACH_GLOBAL));
    return reinterpret_cast<void *>(ptr);
  }
  configurePool();
  CHECK(cuMemAllocAsync(&ptr, sizeBytes, stream));
  return reinterpret_cast<void *>(ptr);
}

void mgpuMemFree(void *ptr, CUstream stream) {
  if (ptr)
    CHECK(cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(ptr), stream));
}

void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, CUstream stream) {
  CHECK(cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                      reinterpret_cast<CUdeviceptr>(src), sizeBytes, stream));
}

void mgpuMemset32(void *dst, unsigned int value, size_t count,
                  CUstream stream) {
  CHECK(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                         stream));
}

void mgpuMemset16(void *dst, unsigned short value, size_t count,
                  CUstream stream) {
  CHECK(cuMemsetD16Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                         stream));
}

void mgpuSetDefaultDevice(int32_t device) {
  CUdevice dev;
  if (CHECK(cuInit(0)) && CHECK(cuDeviceGet(&dev, device)) &&
      CHECK(cuDevicePrimaryCtxRetain(&context, dev)))
    CHECK(cuCtxSetCurrent(context));
}

} // extern "C"
