//===- CudaRuntimeTest.cpp - the AOT runtime's stream contract -----------===//
//
// The runtime (lib/pisa/Runtime) against a recording fake of the CUDA
// driver, so that its contract is checked without a GPU: every call runs on
// the caller's stream, the legacy default stream (NULL) unless one is set,
// and nothing creates, waits for or destroys a stream of its own. A private
// non-blocking stream on the default stream read inputs PyTorch had not
// finished writing (issue 11's wrong rows); the device check is
// `python3 -m pisa.check_stream_order`.
//
//===----------------------------------------------------------------------===//

#include "pisa/Runtime/PisaRuntime.h"

#include <cuda.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

//===----------------------------------------------------------------------===//
// The fake driver: records what the runtime asked for.
//===----------------------------------------------------------------------===//

namespace {
struct DriverLog {
  std::vector<std::string> calls;
  std::vector<CUstream> streams; ///< the stream of each stream-taking call
  CUresult failLaunch = CUDA_SUCCESS;
  void clear() { *this = DriverLog(); }
  int count(const std::string &name) const {
    int n = 0;
    for (const std::string &c : calls)
      n += c == name;
    return n;
  }
} driver;

CUresult record(const char *name, CUstream stream = nullptr,
                bool hasStream = false) {
  driver.calls.push_back(name);
  if (hasStream)
    driver.streams.push_back(stream);
  return CUDA_SUCCESS;
}

CUcontext fakeContext = reinterpret_cast<CUcontext>(0x1000);
CUstream fakePrivateStream = reinterpret_cast<CUstream>(0x2000);
} // namespace

extern "C" {
CUresult CUDAAPI cuGetErrorName(CUresult, const char **s) {
  *s = "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult, const char **s) {
  *s = "fake failure";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuInit(unsigned) { return record("cuInit"); }
CUresult CUDAAPI cuDeviceGet(CUdevice *d, int) {
  *d = 0;
  return record("cuDeviceGet");
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice) {
  *c = fakeContext;
  return record("cuDevicePrimaryCtxRetain");
}
CUresult CUDAAPI cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxGetDevice(CUdevice *d) {
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *p, CUdevice) {
  *p = nullptr;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool, CUmemPool_attribute,
                                       void *) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleLoadData(CUmodule *m, const void *) {
  *m = reinterpret_cast<CUmodule>(0x3000);
  return record("cuModuleLoadData");
}
CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *m, const void *, unsigned,
                                    CUjit_option *, void **) {
  *m = reinterpret_cast<CUmodule>(0x3000);
  return record("cuModuleLoadDataEx");
}
CUresult CUDAAPI cuModuleUnload(CUmodule) { return record("cuModuleUnload"); }
CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule, const char *) {
  *f = reinterpret_cast<CUfunction>(0x4000);
  return record("cuModuleGetFunction");
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) {
  return record("cuFuncSetAttribute");
}
CUresult CUDAAPI cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned,
                                unsigned, unsigned, unsigned, unsigned,
                                CUstream s, void **, void **) {
  record("cuLaunchKernel", s, true);
  return driver.failLaunch;
}
CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned) {
  *s = fakePrivateStream;
  return record("cuStreamCreate");
}
CUresult CUDAAPI cuStreamDestroy(CUstream s) {
  return record("cuStreamDestroy", s, true);
}
CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  return record("cuStreamSynchronize", s, true);
}
CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent, unsigned) {
  return record("cuStreamWaitEvent", s, true);
}
CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned) {
  *e = reinterpret_cast<CUevent>(0x5000);
  return record("cuEventCreate");
}
CUresult CUDAAPI cuEventDestroy(CUevent) { return record("cuEventDestroy"); }
CUresult CUDAAPI cuEventSynchronize(CUevent) {
  return record("cuEventSynchronize");
}
CUresult CUDAAPI cuEventRecord(CUevent, CUstream s) {
  return record("cuEventRecord", s, true);
}
CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *p, size_t, unsigned) {
  *p = 0x6000;
  return record("cuMemAllocManaged");
}
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *p, size_t, CUstream s) {
  *p = 0x7000;
  return record("cuMemAllocAsync", s, true);
}
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr, CUstream s) {
  return record("cuMemFreeAsync", s, true);
}
CUresult CUDAAPI cuMemFree(CUdeviceptr) { return record("cuMemFree"); }
CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr, CUdeviceptr, size_t, CUstream s) {
  return record("cuMemcpyAsync", s, true);
}
CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr, unsigned short, size_t,
                                  CUstream s) {
  return record("cuMemsetD16Async", s, true);
}
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr, unsigned, size_t, CUstream s) {
  return record("cuMemsetD32Async", s, true);
}

// The mgpu* ABI the generated host code calls (lib/pisa/Runtime).
CUstream mgpuStreamCreate();
void mgpuStreamDestroy(CUstream);
void mgpuStreamSynchronize(CUstream);
void *mgpuMemAlloc(uint64_t, CUstream, bool);
void mgpuMemFree(void *, CUstream);
void mgpuMemset32(void *, unsigned, size_t, CUstream);
CUmodule mgpuModuleLoad(void *, size_t);
CUfunction mgpuModuleGetFunction(CUmodule, const char *);
void mgpuLaunchKernel(CUfunction, intptr_t, intptr_t, intptr_t, intptr_t,
                      intptr_t, intptr_t, int32_t, CUstream, void **, void **,
                      size_t);
}

namespace {

/// What gpu-to-llvm host code does for one entry point call: a stream, an
/// allocation, a memset, a launch, a free, a synchronisation, the stream
/// destroyed.
void hostCodeOfOneCall() {
  CUstream stream = mgpuStreamCreate();
  void *scratch = mgpuMemAlloc(256, stream, false);
  mgpuMemset32(scratch, 0, 64, stream);
  CUmodule module = mgpuModuleLoad(nullptr, 0);
  CUfunction kernel = mgpuModuleGetFunction(module, "k");
  mgpuLaunchKernel(kernel, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr, 0);
  mgpuMemFree(scratch, stream);
  mgpuStreamSynchronize(stream);
  mgpuStreamDestroy(stream);
}

class CudaRuntimeTest : public ::testing::Test {
protected:
  void SetUp() override {
    pisa_runtime_clear_error();
    driver.clear();
  }
  void TearDown() override { pisa_runtime_set_stream(nullptr); }
};

TEST_F(CudaRuntimeTest, DefaultIsTheLegacyStreamWithoutAPrivateOne) {
  pisa_runtime_set_stream(nullptr);
  hostCodeOfOneCall();
  EXPECT_EQ(driver.count("cuStreamCreate"), 0);
  EXPECT_EQ(driver.count("cuStreamDestroy"), 0);
  EXPECT_EQ(driver.count("cuStreamSynchronize"), 0);
  ASSERT_FALSE(driver.streams.empty());
  for (CUstream s : driver.streams)
    EXPECT_EQ(s, nullptr) << "work off the caller's (legacy) stream";
  EXPECT_EQ(pisa_runtime_last_error(), nullptr);
}

TEST_F(CudaRuntimeTest, EveryCallRunsOnTheCallersStream) {
  CUstream caller = reinterpret_cast<CUstream>(0x8000);
  pisa_runtime_set_stream(caller);
  hostCodeOfOneCall();
  pisa_runtime_free(reinterpret_cast<void *>(0x7000));
  EXPECT_EQ(driver.count("cuStreamCreate"), 0);
  EXPECT_EQ(driver.count("cuStreamSynchronize"), 0)
      << "a call must stay stream-ordered, not wait";
  ASSERT_EQ(driver.count("cuLaunchKernel"), 1);
  ASSERT_EQ(driver.count("cuMemFreeAsync"), 2);
  for (CUstream s : driver.streams)
    EXPECT_EQ(s, caller);
}

TEST_F(CudaRuntimeTest, ResultIsFreedInStreamOrder) {
  pisa_runtime_set_stream(nullptr);
  pisa_runtime_free(reinterpret_cast<void *>(0x7000));
  EXPECT_EQ(driver.count("cuMemFree"), 0) << "cuMemFree synchronises";
  EXPECT_EQ(driver.count("cuMemFreeAsync"), 1);
  pisa_runtime_free(nullptr);
  EXPECT_EQ(driver.count("cuMemFreeAsync"), 1);
}

TEST_F(CudaRuntimeTest, FirstDriverErrorIsKept) {
  driver.failLaunch = CUDA_ERROR_INVALID_VALUE;
  hostCodeOfOneCall();
  const char *error = pisa_runtime_last_error();
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("cuLaunchKernel"), std::string::npos);
  EXPECT_NE(std::string(error).find("CUDA_ERROR_FAKE"), std::string::npos);
  pisa_runtime_clear_error();
  EXPECT_EQ(pisa_runtime_last_error(), nullptr);
}

} // namespace
