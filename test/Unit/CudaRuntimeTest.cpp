//===- CudaRuntimeTest.cpp - the AOT runtime's call contract -------------===//
//
// The runtime (lib/pisa/Runtime) against a recording fake of the CUDA
// driver, so that the contract of PisaRuntime.h is checked without a GPU:
// every operation of a call runs on the caller's stream (NULL is the
// legacy default stream) and never on a stream of its own (a private
// non-blocking stream read inputs PyTorch had not finished writing: issue
// 11's wrong rows); memory comes from the caller's workspace; modules load
// lazily in the caller's context; bad calls are rejected before anything
// is enqueued; failures come back as a status and a message, never printed.
//
//===----------------------------------------------------------------------===//

#include "pisa/Runtime/EntryTable.h"
#include "pisa/Runtime/PisaRuntime.h"

#include <cuda.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace pisa::runtime;

//===----------------------------------------------------------------------===//
// The fake driver: records what the runtime asked for.
//===----------------------------------------------------------------------===//

namespace {
struct DriverLog {
  std::mutex lock;
  std::vector<std::string> calls;
  std::vector<CUstream> streams; ///< the stream of each stream-taking call
  CUresult failLaunch = CUDA_SUCCESS;
  /// cuFuncGetParamInfo: each parameter 8 bytes at 8 i (a driver without
  /// it answers CUDA_ERROR_NOT_SUPPORTED).
  bool paramInfo = true;
  /// No usable driver: cuCtxGetCurrent answers "not initialized", cuInit
  /// CUDA_ERROR_NO_DEVICE, and the error queries fail (as a stub does).
  bool noDriver = false;
  /// The last launch's parameters as the driver got them: one buffer
  /// (packed) or one pointer per parameter.
  bool lastPacked = false;
  std::vector<char> lastBuffer;
  void clear() {
    std::lock_guard<std::mutex> g(lock);
    calls.clear();
    streams.clear();
    failLaunch = CUDA_SUCCESS;
    paramInfo = true;
    noDriver = false;
    lastPacked = false;
    lastBuffer.clear();
  }
  int count(const std::string &name) {
    std::lock_guard<std::mutex> g(lock);
    int n = 0;
    for (const std::string &c : calls)
      n += c == name;
    return n;
  }
} driver;

thread_local CUcontext currentFakeContext = reinterpret_cast<CUcontext>(0x1000);

CUresult record(const char *name, CUstream stream = nullptr,
                bool hasStream = false) {
  std::lock_guard<std::mutex> g(driver.lock);
  driver.calls.push_back(name);
  if (hasStream)
    driver.streams.push_back(stream);
  return CUDA_SUCCESS;
}
} // namespace

extern "C" {
CUresult CUDAAPI cuGetErrorName(CUresult, const char **s) {
  if (driver.noDriver)
    return CUDA_ERROR_NOT_INITIALIZED;
  *s = "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult, const char **s) {
  if (driver.noDriver)
    return CUDA_ERROR_NOT_INITIALIZED;
  *s = "fake failure";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuInit(unsigned) {
  record("cuInit");
  return driver.noDriver ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetCurrent(CUcontext *c) {
  if (driver.noDriver) {
    *c = nullptr;
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  *c = currentFakeContext;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleLoadData(CUmodule *m, const void *) {
  *m = reinterpret_cast<CUmodule>(0x3000);
  return record("cuModuleLoadData");
}
CUresult CUDAAPI cuModuleUnload(CUmodule) { return record("cuModuleUnload"); }
CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule, const char *) {
  *f = reinterpret_cast<CUfunction>(0x4000);
  return record("cuModuleGetFunction");
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) {
  return record("cuFuncSetAttribute");
}
CUresult CUDAAPI cuFuncGetParamInfo(CUfunction, size_t index, size_t *offset,
                                    size_t *size) {
  record("cuFuncGetParamInfo");
  if (!driver.paramInfo)
    return CUDA_ERROR_NOT_SUPPORTED;
  *offset = 8 * index;
  *size = 8;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned,
                                unsigned, unsigned, unsigned, unsigned,
                                CUstream s, void **params, void **extra) {
  record("cuLaunchKernel", s, true);
  std::lock_guard<std::mutex> g(driver.lock);
  driver.lastPacked = extra != nullptr;
  driver.lastBuffer.clear();
  if (extra && extra[0] == CU_LAUNCH_PARAM_BUFFER_POINTER &&
      extra[2] == CU_LAUNCH_PARAM_BUFFER_SIZE &&
      extra[4] == CU_LAUNCH_PARAM_END && !params) {
    const char *buffer = static_cast<const char *>(extra[1]);
    driver.lastBuffer.assign(buffer, buffer + *static_cast<size_t *>(extra[3]));
  }
  return driver.failLaunch;
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
// Device pointers of these tests are host memory: a read back is a copy.
CUresult CUDAAPI cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes,
                                   CUstream s) {
  std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
  return record("cuMemcpyDtoHAsync", s, true);
}
CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  return record("cuStreamSynchronize", s, true);
}

// The mgpu* ABI the generated host code calls (lib/pisa/Runtime).
CUstream mgpuStreamCreate();
void mgpuStreamDestroy(CUstream);
void mgpuStreamSynchronize(CUstream);
void *mgpuMemAlloc(uint64_t, CUstream, bool);
void mgpuMemFree(void *, CUstream);
void mgpuMemset32(void *, unsigned, size_t, CUstream);
void *mgpuModuleLoad(void *, size_t);
void mgpuModuleUnload(void *);
CUfunction mgpuModuleGetFunction(void *, const char *);
void mgpuLaunchKernel(CUfunction, intptr_t, intptr_t, intptr_t, intptr_t,
                      intptr_t, intptr_t, int32_t, CUstream, void **, void **,
                      size_t);
}

namespace {

/// One argument's fields of an entry table (EntryTable.h): its kind and
/// sizes, and what a validating call checks of it (roles, the argument
/// they refer to, the capacity) or, for an index, its range.
struct TableArg {
  int64_t kind;
  std::vector<int64_t> sizes;
  int64_t roles = 0, refersTo = -1, capacity = 0;
  int64_t lowest = 0, highest = 0;
  int64_t elementBytes = 4;
};

std::vector<int64_t> entryTable(int64_t workspaceBytes,
                                std::vector<TableArg> args) {
  std::vector<int64_t> t = {kEntryTableVersion, int64_t(args.size()),
                            workspaceBytes};
  for (TableArg &a : args) {
    t.insert(t.end(), {a.kind, int64_t(a.sizes.size()), a.lowest, a.highest});
    a.sizes.resize(kMaxRank, 0);
    t.insert(t.end(), a.sizes.begin(), a.sizes.end());
    t.insert(t.end(), {a.roles, a.refersTo, a.capacity,
                       a.kind == kIndex ? 0 : a.elementBytes});
  }
  return t;
}

/// What pisa_F_validate does: describe, begin, validate, end.
int validateCall(const std::vector<int64_t> &table, PisaCall &call,
                 void *const *values, int64_t *descriptors) {
  int status = pisaCallDescribe(table.data(), "f", &call, values, descriptors);
  if (status == PISA_OK)
    status = pisaCallBegin("f", &call, 0);
  if (status == PISA_OK)
    status = pisaCallValidate(table.data(), "f", descriptors);
  if (status == PISA_OK)
    status = pisaCallEnd();
  return status;
}

/// An entry like pisa-compile's: f(q: f32 [2, 8], offset: index in [0, 4])
/// -> i32 [8], needing 1280 bytes of workspace (allocations of 300 and 600
/// bytes, each rounded up to 256).
std::vector<int64_t> exampleTable() {
  TableArg offset{kIndex, {}};
  offset.highest = 4;
  return entryTable(1280, {{kInput, {2, 8}}, offset, {kResult, {8}}});
}

struct Call {
  std::vector<int64_t> table = exampleTable();
  void *q = reinterpret_cast<void *>(0x10000);
  int64_t offset = 2;
  void *out = reinterpret_cast<void *>(0x20000);
  char error[256] = "untouched";
  PisaCall call{nullptr, reinterpret_cast<void *>(0x100000), 1280, error,
                sizeof(error)};
  int64_t descriptors[64];
  /// What the generated wrapper does before the lowered function runs.
  int begin() {
    void *values[] = {q, reinterpret_cast<void *>(offset), out};
    int status =
        pisaCallDescribe(table.data(), "f", &call, values, descriptors);
    if (status != PISA_OK)
      return status;
    return pisaCallBegin("f", &call, table[2]);
  }
};

/// f(q: f32 [?, 8], offset: index) -> i32 [?]: sizes given at the call,
/// after each pointer.
std::vector<int64_t> dynamicTable() {
  std::vector<int64_t> t = exampleTable();
  t[2] = kDynamicSize;
  t[kHeaderFields + kSizes] = kDynamicSize;                  // q's rows
  t[kHeaderFields + 2 * kArgFields + kSizes] = kDynamicSize; // result's size
  t[kHeaderFields + kArgFields + kHighest] = INT64_MAX;
  return t;
}

void *theModule = mgpuModuleLoad(nullptr, 0);

/// What gpu-to-llvm host code does for one entry point call: a stream, two
/// allocations, a memset, a launch, frees, a synchronisation, the stream
/// destroyed. Returns the two allocations.
std::pair<void *, void *> hostCodeOfOneCall() {
  CUstream stream = mgpuStreamCreate();
  void *a = mgpuMemAlloc(300, stream, false);
  void *b = mgpuMemAlloc(600, stream, false);
  mgpuMemset32(a, 0, 64, stream);
  CUfunction kernel = mgpuModuleGetFunction(theModule, "k");
  mgpuLaunchKernel(kernel, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr, 0);
  mgpuMemFree(a, stream);
  mgpuMemFree(b, stream);
  mgpuStreamSynchronize(stream);
  mgpuStreamDestroy(stream);
  return {a, b};
}

class CudaRuntimeTest : public ::testing::Test {
protected:
  void SetUp() override {
    pisa_runtime_clear_error();
    driver.clear();
    currentFakeContext = reinterpret_cast<CUcontext>(0x1000);
  }
};

TEST_F(CudaRuntimeTest, NoUsableDriverIsACudaErrorNamingTheCall) {
  driver.noDriver = true;
  char error[256] = "untouched";
  PisaCall call{nullptr, nullptr, 0, error, sizeof(error)};
  std::vector<int64_t> table = dynamicTable();
  int64_t d[64];
  void *values[] = {
      reinterpret_cast<void *>(0x10000), reinterpret_cast<void *>(int64_t(5)),
      reinterpret_cast<void *>(int64_t(3)), reinterpret_cast<void *>(0x20000),
      reinterpret_cast<void *>(int64_t(7))};
  auto begin = [&] {
    int status = pisaCallDescribe(table.data(), "f", &call, values, d);
    return status == PISA_OK ? pisaCallBegin("f", &call, 0) : status;
  };
  EXPECT_EQ(begin(), PISA_ERROR_CUDA);
  EXPECT_STREQ(error, "pisa_f: cuInit(0) failed: CUDA error 100 (the driver "
                      "gives no description: is a CUDA driver installed and "
                      "a GPU visible?)");
  EXPECT_STREQ(pisa_runtime_last_error(), error);
  driver.noDriver = false;
  // A thread without a context stays the caller's argument error.
  currentFakeContext = nullptr;
  EXPECT_EQ(begin(), PISA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(error).find("no current CUDA context"),
            std::string::npos)
      << error;
  currentFakeContext = reinterpret_cast<CUcontext>(0x1000);
}

TEST_F(CudaRuntimeTest, LoadingTheLibraryTouchesNoDriver) {
  void *module = mgpuModuleLoad(reinterpret_cast<void *>(0x1), 0);
  EXPECT_TRUE(driver.calls.empty()) << "no cuInit or module load at load time";
  mgpuModuleUnload(module);
}

TEST_F(CudaRuntimeTest, EverythingRunsOnTheCallersStreamAndWorkspace) {
  Call c;
  c.call.stream = reinterpret_cast<void *>(0x8000);
  ASSERT_EQ(c.begin(), PISA_OK) << c.error;
  auto [a, b] = hostCodeOfOneCall();
  EXPECT_EQ(pisaCallEnd(), PISA_OK);
  EXPECT_EQ(a, c.call.workspace);
  EXPECT_EQ(b, static_cast<char *>(c.call.workspace) + alignWorkspace(300));
  EXPECT_EQ(driver.count("cuLaunchKernel"), 1);
  ASSERT_FALSE(driver.streams.empty());
  for (CUstream s : driver.streams)
    EXPECT_EQ(s, c.call.stream);
  EXPECT_EQ(std::string(c.error), "");
}

TEST_F(CudaRuntimeTest, NullStreamIsTheLegacyDefaultStream) {
  Call c;
  ASSERT_EQ(c.begin(), PISA_OK);
  hostCodeOfOneCall();
  EXPECT_EQ(pisaCallEnd(), PISA_OK);
  for (CUstream s : driver.streams)
    EXPECT_EQ(s, nullptr);
}

TEST_F(CudaRuntimeTest, DescriptorsAreContiguousCOrder) {
  Call c;
  ASSERT_EQ(c.begin(), PISA_OK);
  pisaCallEnd();
  // q: allocated, aligned, offset, sizes {2, 8}, strides {8, 1}.
  EXPECT_EQ(c.descriptors[0], 0x10000);
  EXPECT_EQ(c.descriptors[1], 0x10000);
  EXPECT_EQ(c.descriptors[2], 0);
  EXPECT_EQ(c.descriptors[3], 2);
  EXPECT_EQ(c.descriptors[4], 8);
  EXPECT_EQ(c.descriptors[5], 8);
  EXPECT_EQ(c.descriptors[6], 1);
  // The result follows (the index argument has none): sizes {8}, strides {1}.
  int64_t *r = c.descriptors + descriptorBytes(2) / 8;
  EXPECT_EQ(r[0], 0x20000);
  EXPECT_EQ(r[3], 8);
  EXPECT_EQ(r[4], 1);
}

TEST_F(CudaRuntimeTest, ModulesLoadOncePerContext) {
  void *module = mgpuModuleLoad(reinterpret_cast<void *>(0x2), 0);
  auto callOnce = [&] {
    Call c;
    ASSERT_EQ(c.begin(), PISA_OK);
    EXPECT_NE(mgpuModuleGetFunction(module, "k"), nullptr);
    EXPECT_EQ(pisaCallEnd(), PISA_OK);
  };
  for (int i = 0; i < 3; ++i)
    callOnce();
  EXPECT_EQ(driver.count("cuModuleLoadData"), 1);
  currentFakeContext = reinterpret_cast<CUcontext>(0x1100); // another device
  callOnce();
  callOnce();
  EXPECT_EQ(driver.count("cuModuleLoadData"), 2);
  mgpuModuleUnload(module);
  EXPECT_EQ(driver.count("cuModuleUnload"), 2);
}

/// Each bad call: the status, a message naming the problem, and nothing
/// enqueued (the wrapper does not run the host code after a failed begin).
struct BadCall {
  const char *what;
  void (*spoil)(Call &);
  int status;
  const char *message;
};

const BadCall kBadCalls[] = {
    {"null input", [](Call &c) { c.q = nullptr; }, PISA_ERROR_INVALID_ARGUMENT,
     "argument 0 is NULL"},
    {"misaligned input",
     [](Call &c) { c.q = reinterpret_cast<void *>(0x10008); },
     PISA_ERROR_INVALID_ARGUMENT,
     "argument 0 (0x10008) is not 16-byte aligned"},
    {"null result", [](Call &c) { c.out = nullptr; },
     PISA_ERROR_INVALID_ARGUMENT, "result 2 is NULL"},
    {"offset past the keys", [](Call &c) { c.offset = 5; },
     PISA_ERROR_INVALID_ARGUMENT, "argument 1 is 5, outside [0, 4]"},
    {"negative offset", [](Call &c) { c.offset = -1; },
     PISA_ERROR_INVALID_ARGUMENT, "argument 1 is -1, outside [0, 4]"},
    {"small workspace", [](Call &c) { c.call.workspace_bytes = 1279; },
     PISA_ERROR_WORKSPACE, "smaller than the 1280 bytes"},
    {"no workspace", [](Call &c) { c.call.workspace = nullptr; },
     PISA_ERROR_WORKSPACE, "smaller than the 1280 bytes"},
    {"misaligned workspace",
     [](Call &c) { c.call.workspace = reinterpret_cast<void *>(0x100010); },
     PISA_ERROR_WORKSPACE, "is not 256-byte aligned"},
    {"no context", [](Call &) { currentFakeContext = nullptr; },
     PISA_ERROR_INVALID_ARGUMENT, "no current CUDA context on this thread"},
    {"result inside the input",
     [](Call &c) { c.out = reinterpret_cast<void *>(0x10030); },
     PISA_ERROR_INVALID_ARGUMENT, "result 2 overlaps argument 0"},
    {"input inside the result",
     [](Call &c) { c.q = reinterpret_cast<void *>(0x20010); },
     PISA_ERROR_INVALID_ARGUMENT, "result 2 overlaps argument 0"},
};

/// f(q: f32 [2, 8], offset: index) -> (i32 [8], f16 [4]): 64, 32 and 8
/// bytes. Results may touch another tensor but not share a byte with it.
TEST_F(CudaRuntimeTest, ResultsMustNotOverlapOtherTensors) {
  TableArg offset{kIndex, {}};
  offset.highest = 4;
  TableArg half{kResult, {4}};
  half.elementBytes = 2;
  std::vector<int64_t> table =
      entryTable(0, {{kInput, {2, 8}}, offset, {kResult, {8}}, half});
  char error[256] = "untouched";
  PisaCall call{nullptr, nullptr, 0, error, sizeof(error)};
  int64_t d[64];
  auto describe = [&](uintptr_t q, uintptr_t first, uintptr_t second) {
    void *values[] = {reinterpret_cast<void *>(q), nullptr,
                      reinterpret_cast<void *>(first),
                      reinterpret_cast<void *>(second)};
    return pisaCallDescribe(table.data(), "f", &call, values, d);
  };
  EXPECT_EQ(describe(0x10000, 0x10040, 0x10060), PISA_OK) << error;
  EXPECT_EQ(describe(0x10000, 0x10030, 0x20000), PISA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(error).find("result 2 overlaps argument 0"),
            std::string::npos)
      << error;
  EXPECT_EQ(describe(0x10000, 0x20000, 0x20010), PISA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(error).find("result 2 overlaps result 3"),
            std::string::npos)
      << error;
  EXPECT_EQ(describe(0x10000, 0x20010, 0x20020), PISA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(error).find("overlaps result"), std::string::npos)
      << error;
  EXPECT_EQ(describe(0x10030, 0x20000, 0x10040), PISA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(error).find("result 3 overlaps argument 0"),
            std::string::npos)
      << error;
}

/// Every tensor of an entry takes part in the overlap check, however many
/// there are: 70 inputs of 4 f32 and a result overlapping input 68 (the
/// check used to see the first 64 tensors only), or a result whose bytes
/// wrap past the end of the address space.
TEST_F(CudaRuntimeTest, OverlapCheckCoversEveryTensor) {
  std::vector<TableArg> args(70, TableArg{kInput, {4}});
  args.push_back(TableArg{kResult, {4}});
  std::vector<int64_t> table = entryTable(0, args);
  char error[256] = "untouched";
  PisaCall call{nullptr, nullptr, 0, error, sizeof(error)};
  std::vector<int64_t> d(71 * 16);
  auto describe = [&](uintptr_t result) {
    std::vector<void *> values;
    for (uintptr_t i = 0; i < 70; ++i)
      values.push_back(reinterpret_cast<void *>(0x10000 + 0x100 * i));
    values.push_back(reinterpret_cast<void *>(result));
    return pisaCallDescribe(table.data(), "f", &call, values.data(), d.data());
  };
  EXPECT_EQ(describe(0x90000), PISA_OK) << error;
  EXPECT_EQ(describe(0x10000 + 0x100 * 68), PISA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(error).find("result 70 overlaps argument 68"),
            std::string::npos)
      << error;
  EXPECT_EQ(describe(UINTPTR_MAX - 0xf), PISA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(error).find("ends past the end of the address space"),
            std::string::npos)
      << error;
}

TEST_F(CudaRuntimeTest, BadCallsAreRejectedWithAMessage) {
  for (const BadCall &bad : kBadCalls) {
    SetUp();
    Call c;
    bad.spoil(c);
    EXPECT_EQ(c.begin(), bad.status) << bad.what;
    EXPECT_NE(std::string(c.error).find(bad.message), std::string::npos)
        << bad.what << ": " << c.error;
    EXPECT_EQ(std::string(c.error).rfind("pisa_f: ", 0), 0u) << c.error;
    ASSERT_NE(pisa_runtime_last_error(), nullptr);
    EXPECT_EQ(std::string(pisa_runtime_last_error()), std::string(c.error));
    EXPECT_EQ(driver.count("cuLaunchKernel"), 0) << bad.what;
    // Outside a call no device memory is handed out.
    EXPECT_EQ(mgpuMemAlloc(16, nullptr, false), nullptr) << bad.what;
  }
  std::vector<int64_t> table = exampleTable();
  void *values[3] = {};
  int64_t descriptors[64];
  EXPECT_EQ(pisaCallDescribe(table.data(), "f", nullptr, values, descriptors),
            PISA_ERROR_INVALID_ARGUMENT);
}

TEST_F(CudaRuntimeTest, DynamicSizesComeFromTheCall) {
  std::vector<int64_t> table = dynamicTable();
  char error[256] = "untouched";
  PisaCall call{nullptr, reinterpret_cast<void *>(0x100000), 4096, error,
                sizeof(error)};
  int64_t d[64];
  auto describe = [&](void *q, int64_t rows, void *out, int64_t size) {
    void *values[] = {q, reinterpret_cast<void *>(rows),
                      reinterpret_cast<void *>(int64_t(3)), out,
                      reinterpret_cast<void *>(size)};
    return pisaCallDescribe(table.data(), "f", &call, values, d);
  };
  void *q = reinterpret_cast<void *>(0x10000);
  void *out = reinterpret_cast<void *>(0x20000);
  ASSERT_EQ(describe(q, 5, out, 7), PISA_OK) << error;
  // q: sizes {5, 8}, strides {8, 1}; the result: size {7}, stride {1}.
  EXPECT_EQ(d[3], 5);
  EXPECT_EQ(d[4], 8);
  EXPECT_EQ(d[5], 8);
  EXPECT_EQ(d[6], 1);
  int64_t *r = d + descriptorBytes(2) / 8;
  EXPECT_EQ(r[0], 0x20000);
  EXPECT_EQ(r[3], 7);
  EXPECT_EQ(r[4], 1);
  // A negative size is refused; an empty tensor may be NULL.
  EXPECT_EQ(describe(q, -1, out, 7), PISA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(error).find("argument 0 has a negative size"),
            std::string::npos)
      << error;
  // Sizes whose element count passes 2^46 (or 2^63) are refused the same
  // way, so that nothing derived from them wraps.
  for (int64_t rows : {(int64_t(1) << 43) + 1, int64_t(1) << 62, INT64_MAX})
    EXPECT_EQ(describe(q, rows, out, 7), PISA_ERROR_INVALID_ARGUMENT) << rows;
  // (2^43 rows of q are 2^48 bytes: a result must lie past them.)
  void *far = reinterpret_cast<void *>(int64_t(1) << 52);
  EXPECT_EQ(describe(q, int64_t(1) << 43, far, 7), PISA_OK) << error;
  EXPECT_EQ(describe(nullptr, 0, out, 7), PISA_OK) << error;
  EXPECT_EQ(describe(nullptr, 1, out, 7), PISA_ERROR_INVALID_ARGUMENT);
  // The workspace query's path: sizes only.
  void *values[] = {nullptr, reinterpret_cast<void *>(int64_t(9)), nullptr,
                    nullptr, nullptr};
  EXPECT_EQ(pisaCallSizes(table.data(), values, d), 0);
  EXPECT_EQ(d[3], 9);
  values[1] = reinterpret_cast<void *>(int64_t(-2));
  EXPECT_EQ(pisaCallSizes(table.data(), values, d), 1);
  EXPECT_EQ(driver.count("cuLaunchKernel"), 0);
}

TEST_F(CudaRuntimeTest, RefusedRulesNameTheRule) {
  char error[256] = "untouched";
  PisaCall call{nullptr, nullptr, 0, error, sizeof(error)};
  std::vector<int64_t> table = exampleTable();
  void *values[] = {reinterpret_cast<void *>(0x10000),
                    reinterpret_cast<void *>(int64_t(1)),
                    reinterpret_cast<void *>(0x20000)};
  int64_t d[64];
  ASSERT_EQ(pisaCallDescribe(table.data(), "f", &call, values, d), PISA_OK);
  const char rules[] = "first rule\0second rule\0";
  EXPECT_EQ(pisaCallRefuse("f", &call, rules, 2), PISA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(error), "pisa_f: second rule");
  EXPECT_EQ(mgpuMemAlloc(16, nullptr, false), nullptr);
}

TEST_F(CudaRuntimeTest, DriverFailureIsAStatusNotAPrint) {
  Call c;
  ASSERT_EQ(c.begin(), PISA_OK);
  driver.failLaunch = CUDA_ERROR_INVALID_VALUE;
  testing::internal::CaptureStderr();
  hostCodeOfOneCall();
  std::string printed = testing::internal::GetCapturedStderr();
  EXPECT_EQ(pisaCallEnd(), PISA_ERROR_CUDA);
  EXPECT_EQ(printed, "");
  EXPECT_NE(std::string(c.error).find("cuLaunchKernel"), std::string::npos);
  EXPECT_NE(std::string(c.error).find("CUDA_ERROR_FAKE"), std::string::npos);
  // The next call starts clean.
  driver.failLaunch = CUDA_SUCCESS;
  Call next;
  ASSERT_EQ(next.begin(), PISA_OK);
  hostCodeOfOneCall();
  EXPECT_EQ(pisaCallEnd(), PISA_OK);
}

TEST_F(CudaRuntimeTest, ThreadsKeepTheirOwnCalls) {
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<int> ok(kThreads, 0);
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([i, &ok] {
      for (int n = 0; n < 200; ++n) {
        Call c;
        c.call.stream = reinterpret_cast<void *>(0x8000 + 0x100 * i);
        c.call.workspace = reinterpret_cast<void *>(0x1000000 * (i + 1));
        if (c.begin() != PISA_OK)
          return;
        CUstream s = mgpuStreamCreate();
        void *a = mgpuMemAlloc(300, s, false);
        std::this_thread::yield();
        void *b = mgpuMemAlloc(600, s, false);
        bool mine = s == c.call.stream && a == c.call.workspace &&
                    b == static_cast<char *>(a) + alignWorkspace(300);
        if (pisaCallEnd() != PISA_OK || !mine)
          return;
      }
      ok[i] = 1;
    });
  for (std::thread &t : threads)
    t.join();
  for (int i = 0; i < kThreads; ++i)
    EXPECT_EQ(ok[i], 1) << "thread " << i;
}

} // namespace

TEST_F(CudaRuntimeTest, KernelHandlesAreLookedUpOnce) {
  // A launch asks for its kernel every time (gpu-to-llvm's host code); the
  // driver is asked once per kernel and context, and a kernel's shared
  // memory limit is raised once, not per launch.
  void *module = mgpuModuleLoad(reinterpret_cast<void *>(0x3), 0);
  static const char kName[] = "k", kOther[] = "k2";
  for (int i = 0; i < 5; ++i) {
    Call c;
    ASSERT_EQ(c.begin(), PISA_OK);
    for (const char *name : {kName, kOther}) {
      CUfunction f = mgpuModuleGetFunction(module, name);
      mgpuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 4096, nullptr, nullptr, nullptr,
                       0);
    }
    EXPECT_EQ(pisaCallEnd(), PISA_OK);
  }
  EXPECT_EQ(driver.count("cuModuleGetFunction"), 2);
  EXPECT_EQ(driver.count("cuLaunchKernel"), 10);
  EXPECT_EQ(driver.count("cuFuncSetAttribute"), 2);
  {
    Call c;
    ASSERT_EQ(c.begin(), PISA_OK);
    mgpuLaunchKernel(mgpuModuleGetFunction(module, kName), 1, 1, 1, 32, 1, 1,
                     8192, nullptr, nullptr, nullptr, 0);
    EXPECT_EQ(pisaCallEnd(), PISA_OK);
  }
  EXPECT_EQ(driver.count("cuFuncSetAttribute"), 3) << "a larger request";
  // Another context loads the module again and looks its kernels up again.
  currentFakeContext = reinterpret_cast<CUcontext>(0x1200);
  {
    Call c;
    ASSERT_EQ(c.begin(), PISA_OK);
    EXPECT_NE(mgpuModuleGetFunction(module, kName), nullptr);
    EXPECT_EQ(pisaCallEnd(), PISA_OK);
  }
  EXPECT_EQ(driver.count("cuModuleGetFunction"), 3);
  // After an unload no handle seen before is trusted with shared memory.
  mgpuModuleUnload(module);
  module = mgpuModuleLoad(reinterpret_cast<void *>(0x3), 0);
  {
    Call c;
    ASSERT_EQ(c.begin(), PISA_OK);
    mgpuLaunchKernel(mgpuModuleGetFunction(module, kName), 1, 1, 1, 32, 1, 1,
                     4096, nullptr, nullptr, nullptr, 0);
    EXPECT_EQ(pisaCallEnd(), PISA_OK);
  }
  EXPECT_EQ(driver.count("cuFuncSetAttribute"), 4);
  mgpuModuleUnload(module);
}

TEST_F(CudaRuntimeTest, LaunchParametersArePackedInOneBuffer) {
  // The driver gets one buffer laid out as cuFuncGetParamInfo says (asked
  // once per kernel), or, from a driver without it, one pointer each.
  void *module = mgpuModuleLoad(reinterpret_cast<void *>(0x4), 0);
  static const char kName[] = "k";
  int64_t a = 0x1122334455667788, b = -3;
  void *c = reinterpret_cast<void *>(0xabcdef0);
  void *params[] = {&a, &b, &c};
  for (int i = 0; i < 3; ++i) {
    Call call;
    ASSERT_EQ(call.begin(), PISA_OK);
    mgpuLaunchKernel(mgpuModuleGetFunction(module, kName), 1, 1, 1, 32, 1, 1, 0,
                     nullptr, params, nullptr, 3);
    EXPECT_EQ(pisaCallEnd(), PISA_OK);
    ASSERT_TRUE(driver.lastPacked);
    ASSERT_EQ(driver.lastBuffer.size(), 24u);
    int64_t got[3];
    std::memcpy(got, driver.lastBuffer.data(), 24);
    EXPECT_EQ(got[0], a);
    EXPECT_EQ(got[1], b);
    EXPECT_EQ(got[2], reinterpret_cast<int64_t>(c));
  }
  EXPECT_EQ(driver.count("cuFuncGetParamInfo"), 3) << "once per parameter";
  mgpuModuleUnload(module);

  driver.clear();
  driver.paramInfo = false;
  module = mgpuModuleLoad(reinterpret_cast<void *>(0x4), 0);
  {
    Call call;
    ASSERT_EQ(call.begin(), PISA_OK);
    mgpuLaunchKernel(mgpuModuleGetFunction(module, kName), 1, 1, 1, 32, 1, 1, 0,
                     nullptr, params, nullptr, 3);
    EXPECT_EQ(pisaCallEnd(), PISA_OK) << call.error;
    EXPECT_FALSE(driver.lastPacked);
    EXPECT_EQ(driver.count("cuLaunchKernel"), 1);
  }
  mgpuModuleUnload(module);
}

/// f(q: f16 [?, 2, 8], k: f16 [?, 1, 8], cu_q: i32 [?], cu_k: i32 [?])
/// -> i32 [?, 1, 4], as pisa-compile describes a varlen selection: the
/// cu_seqlens have roles and name the tensors whose rows they pack.
struct VarlenCall {
  std::vector<int64_t> table;
  // Device pointers are 16-byte aligned (describe checks it).
  alignas(16) int32_t cuQ[4] = {0, 3, 3, 5};
  alignas(16) int32_t cuK[4] = {0, 10, 10, 14};
  int64_t tq = 5, tk = 14;
  char error[256] = "untouched";
  PisaCall call{reinterpret_cast<void *>(0x8000), nullptr, 0, error,
                sizeof(error)};
  int64_t descriptors[128];
  VarlenCall() {
    table = entryTable(0, {{kInput, {kDynamicSize, 2, 8}},
                           {kInput, {kDynamicSize, 1, 8}},
                           {kInput, {kDynamicSize}, roleBit(kCuSeqlensQ), 0},
                           {kInput, {kDynamicSize}, roleBit(kCuSeqlensK), 1},
                           {kResult, {kDynamicSize, 1, 4}}});
  }
  int validate() {
    void *values[] = {reinterpret_cast<void *>(0x10000),
                      reinterpret_cast<void *>(tq),
                      reinterpret_cast<void *>(0x20000),
                      reinterpret_cast<void *>(tk),
                      cuQ,
                      reinterpret_cast<void *>(4),
                      cuK,
                      reinterpret_cast<void *>(4),
                      reinterpret_cast<void *>(0x30000),
                      reinterpret_cast<void *>(tq)};
    return validateCall(table, call, values, descriptors);
  }
};

TEST_F(CudaRuntimeTest, ValidateReadsCuSeqlensBackOnTheCallersStream) {
  VarlenCall c;
  ASSERT_EQ(c.validate(), PISA_OK) << c.error;
  EXPECT_EQ(std::string(c.error), "");
  EXPECT_EQ(driver.count("cuMemcpyDtoHAsync"), 2);
  EXPECT_EQ(driver.count("cuLaunchKernel"), 0);
  for (CUstream s : driver.streams)
    EXPECT_EQ(s, c.call.stream);
}

TEST_F(CudaRuntimeTest, ValidateNamesTheBrokenRule) {
  struct Broken {
    const char *what;
    void (*spoil)(VarlenCall &);
    const char *message;
  };
  const Broken kBroken[] = {
      {"cu_q not from 0", [](VarlenCall &c) { c.cuQ[0] = 1; },
       "argument 2: cu_seqlens_q[0] is 1, expected 0"},
      {"cu_k decreasing", [](VarlenCall &c) { c.cuK[2] = 9; },
       "argument 3: cu_seqlens_k[2] = 9 is below cu_seqlens_k[1] = 10: "
       "cu_seqlens must be non-decreasing"},
      {"cu_k past the keys", [](VarlenCall &c) { c.cuK[3] = 15; },
       "argument 3: cu_seqlens_k[3] = 15, expected 14 (the rows its tensor "
       "packs)"},
      {"cu_q short of the queries", [](VarlenCall &c) { c.tq = 6; },
       "cu_seqlens_q[3] = 5, expected 6"},
      {"more queries than keys",
       [](VarlenCall &c) {
         c.cuK[1] = 2;
         c.cuK[2] = 2;
       },
       "sequence 0 has 3 queries but 2 keys"},
  };
  for (const Broken &bad : kBroken) {
    SetUp();
    VarlenCall c;
    bad.spoil(c);
    EXPECT_EQ(c.validate(), PISA_ERROR_INVALID_ARGUMENT) << bad.what;
    EXPECT_NE(std::string(c.error).find(bad.message), std::string::npos)
        << bad.what << ": " << c.error;
    EXPECT_EQ(std::string(c.error).rfind("pisa_f: ", 0), 0u) << c.error;
    EXPECT_EQ(driver.count("cuLaunchKernel"), 0) << bad.what;
  }
}

/// f(q: f16 [2, 4, ?, 8], seq_lens: i32 [2], from: i32 [2], to: i32 [2])
/// -> i32 [2, 2, ?, 4], as pisa-compile describes a decode step over caches
/// of capacity 100 (pyramid_append, then decode_select).
struct DecodeCall {
  std::vector<int64_t> table;
  alignas(16) int32_t lens[4] = {11, 37};
  alignas(16) int32_t from[4] = {10, 36};
  alignas(16) int32_t to[4] = {11, 37};
  int64_t nq = 1;
  char error[256] = "untouched";
  PisaCall call{reinterpret_cast<void *>(0x8000), nullptr, 0, error,
                sizeof(error)};
  int64_t descriptors[128];
  DecodeCall() {
    table = entryTable(0, {{kInput, {2, 4, kDynamicSize, 8}},
                           {kInput, {2}, roleBit(kSeqLens), 0, 100},
                           {kInput, {2}, roleBit(kAppendFrom), -1, 100},
                           {kInput, {2}, roleBit(kAppendTo), -1, 100},
                           {kResult, {2, 2, kDynamicSize, 4}}});
  }
  int validate() {
    void *values[] = {reinterpret_cast<void *>(0x10000),
                      reinterpret_cast<void *>(nq),
                      lens,
                      from,
                      to,
                      reinterpret_cast<void *>(0x30000),
                      reinterpret_cast<void *>(nq)};
    return validateCall(table, call, values, descriptors);
  }
};

TEST_F(CudaRuntimeTest, ValidateChecksDecodeLengthsAndAppends) {
  {
    DecodeCall c;
    ASSERT_EQ(c.validate(), PISA_OK) << c.error;
    EXPECT_EQ(driver.count("cuMemcpyDtoHAsync"), 3);
  }
  struct Broken {
    const char *what;
    void (*spoil)(DecodeCall &);
    const char *message;
  };
  const Broken kBroken[] = {
      {"empty sequence", [](DecodeCall &c) { c.lens[1] = 0; },
       "argument 1: seq_lens[1] = 0 is outside [1, 100] (Nq <= N_b <= the "
       "cache's capacity)"},
      {"fewer keys than queries", [](DecodeCall &c) { c.nq = 12; },
       "seq_lens[0] = 11 is outside [12, 100]"},
      {"past the capacity", [](DecodeCall &c) { c.lens[0] = 101; },
       "seq_lens[0] = 101 is outside [1, 100]"},
      {"append past the capacity", [](DecodeCall &c) { c.to[0] = 101; },
       "argument 3: to[0] = 101 is outside [0, 100] (positions of the "
       "cache)"},
      {"negative from", [](DecodeCall &c) { c.from[1] = -1; },
       "argument 2: from[1] = -1 is outside [0, 100]"},
      {"shrinking append", [](DecodeCall &c) { c.from[0] = 12; },
       "from[0] = 12 is above to[0] = 11: an append adds keys from .. to - 1"},
  };
  for (const Broken &bad : kBroken) {
    SetUp();
    DecodeCall c;
    bad.spoil(c);
    EXPECT_EQ(c.validate(), PISA_ERROR_INVALID_ARGUMENT) << bad.what;
    EXPECT_NE(std::string(c.error).find(bad.message), std::string::npos)
        << bad.what << ": " << c.error;
    EXPECT_EQ(driver.count("cuLaunchKernel"), 0) << bad.what;
  }
}

TEST_F(CudaRuntimeTest, ValidateChecksTheBlockTableOfAPagedCache) {
  // A paged decode step: a pool of 6 pages of 4 keys, two sequences whose
  // lengths are `to` (also seq_lens), tables of 3 pages each. Only the
  // pages below a sequence's length count.
  std::vector<int64_t> table = entryTable(
      0, {{kInput, {2, 4, 1, 8}},
          {kInput, {6, 4, 1, 8}},
          {kInput, {2}, roleBit(kAppendTo) | roleBit(kSeqLens), 0, 12},
          {kInput, {2, 3}, roleBit(kBlockTable), 1},
          {kResult, {2, 1, 1, 4}}});
  struct Case {
    const char *what;
    int32_t pages[6];
    const char *message; // nullptr: accepted
  } cases[] = {
      // Entry [0][2] is past sequence 0's 5 keys: a repeat there is fine.
      {"valid", {0, 1, 2, 3, 4, 5}, nullptr},
      {"valid, unused entry repeats", {0, 1, 3, 4, 5, 9}, nullptr},
      {"outside the pool",
       {0, 1, 2, 3, 6, 5},
       "argument 3: block_table[1][1] = 6 is outside the pool's 6 pages "
       "(sequence 1 holds 8 keys)"},
      {"negative",
       {0, -1, 2, 3, 4, 5},
       "argument 3: block_table[0][1] = -1 is outside the pool's 6 pages "
       "(sequence 0 holds 5 keys)"},
      {"shared by two sequences",
       {0, 1, 2, 1, 4, 5},
       "argument 3: page 1 is named by block_table[0][1] and "
       "block_table[1][0]"},
  };
  for (const Case &c : cases) {
    alignas(16) int32_t to[4] = {5, 8};
    alignas(16) int32_t pages[8];
    std::copy(std::begin(c.pages), std::end(c.pages), pages);
    char error[256] = "untouched";
    PisaCall call{nullptr, nullptr, 0, error, sizeof(error)};
    int64_t descriptors[64];
    void *values[] = {reinterpret_cast<void *>(0x10000),
                      reinterpret_cast<void *>(0x20000), to, pages,
                      reinterpret_cast<void *>(0x30000)};
    int status = validateCall(table, call, values, descriptors);
    if (!c.message) {
      EXPECT_EQ(status, PISA_OK) << c.what << ": " << error;
      continue;
    }
    EXPECT_EQ(status, PISA_ERROR_INVALID_ARGUMENT) << c.what;
    EXPECT_NE(std::string(error).find(c.message), std::string::npos)
        << c.what << ": " << error;
    EXPECT_EQ(driver.count("cuLaunchKernel"), 0) << c.what;
  }
}

TEST_F(CudaRuntimeTest, AnArgumentWithTwoRolesIsCheckedForBoth) {
  // decode_batch: `to` is the append's end and decode_select's seq_lens.
  // An empty sequence passes as an append (from = to = 0) but not as
  // seq_lens (N_b >= Nq = 1).
  std::vector<int64_t> table = entryTable(
      0, {{kInput, {2, 4, 1, 8}},
          {kInput, {2}, roleBit(kAppendFrom), -1, 100},
          {kInput, {2}, roleBit(kAppendTo) | roleBit(kSeqLens), 0, 100},
          {kResult, {2, 2, 1, 4}}});
  alignas(16) int32_t from[4] = {10, 0}, to[4] = {11, 0};
  char error[256] = "untouched";
  PisaCall call{nullptr, nullptr, 0, error, sizeof(error)};
  int64_t descriptors[64];
  void *values[] = {reinterpret_cast<void *>(0x10000), from, to,
                    reinterpret_cast<void *>(0x30000)};
  EXPECT_EQ(validateCall(table, call, values, descriptors),
            PISA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(error).find("argument 2: seq_lens[1] = 0 is outside "
                                    "[1, 100]"),
            std::string::npos)
      << error;
  EXPECT_EQ(driver.count("cuMemcpyDtoHAsync"), 2) << "each argument read once";
}
