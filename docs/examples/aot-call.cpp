// Calling an AOT library from C++, as docs/embedding.md describes: build the
// library, size the workspace, call on a stream, check the status, and
// capture the call in a CUDA graph.
//
//   $ mkdir -p build/examples
//   $ build/bin/pisa-compile docs/examples/prefill-select.mlir \
//       -o build/examples/libprefill.so
//   $ clang++-22 -std=c++17 -Ibuild/examples -I/usr/local/cuda/include \
//       docs/examples/aot-call.cpp -Lbuild/examples -lprefill \
//       -L/usr/local/cuda/lib64 -lcudart \
//       -L/usr/local/cuda/lib64/stubs -lcuda -Wl,-rpath,'$ORIGIN' \
//       -o build/examples/aot-call
//
// (-lcuda links the toolkit's stub, so that the build needs no driver; the
// library finds the real libcuda.so.1 where it runs.) Then, on a machine
// with a Hopper (sm_90) GPU: build/examples/aot-call
//
// It checks that every result row is a valid selection (section 3 of
// docs/semantics.md: min(K, b_t + 1) distinct blocks of 0..b_t, ascending,
// with 0, b_t - 1 and b_t, then -1), that a replayed graph on new inputs
// gives what a direct call gives, and that a bad call is refused with a
// message and leaves the result untouched. Exit code 0 when all hold.

#include "libprefill.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {
// The shapes of docs/examples/prefill-select.mlir.
constexpr int64_t kHeads = 16, kKeys = 4096, kDim = 128, kTopK = 8, kBlock = 64;

#define CUDA_OK(x)                                                             \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e));             \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

/// Random bf16 values (the top 16 bits of floats).
std::vector<uint16_t> randomBf16(size_t n, std::mt19937 &rng) {
  std::normal_distribution<float> normal;
  std::vector<uint16_t> v(n);
  for (uint16_t &x : v) {
    float f = normal(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    x = uint16_t(bits >> 16);
  }
  return v;
}

int invalidRows(const std::vector<int32_t> &sel) {
  int bad = 0;
  for (int64_t t = 0; t < kKeys; ++t) {
    const int32_t *row = &sel[t * kTopK];
    int64_t bt = t / kBlock, want = bt + 1 < kTopK ? bt + 1 : kTopK;
    bool ok = true, has0 = false, hasPrev = bt < 1, hasLast = false;
    for (int64_t j = 0; j < kTopK; ++j) {
      if (j < want) {
        ok &= row[j] >= 0 && row[j] <= bt && (j == 0 || row[j] > row[j - 1]);
        has0 |= row[j] == 0;
        hasPrev |= row[j] == bt - 1;
        hasLast |= row[j] == bt;
      } else {
        ok &= row[j] == -1;
      }
    }
    bad += !(ok && has0 && hasPrev && hasLast);
  }
  return bad;
}
} // namespace

int main() {
  const size_t qCount = kHeads * kKeys * kDim, kCount = kKeys * kDim;
  const size_t outBytes = kKeys * kTopK * sizeof(int32_t);
  std::mt19937 rng(20261201);

  void *q, *k, *workspace = nullptr;
  int32_t *out;
  CUDA_OK(cudaMalloc(&q, qCount * 2));
  CUDA_OK(cudaMalloc(&k, kCount * 2));
  CUDA_OK(cudaMalloc(&out, outBytes));
  size_t workspaceBytes = pisa_prefill_select_workspace_size();
  if (workspaceBytes)
    CUDA_OK(cudaMalloc(&workspace, workspaceBytes)); // 256-byte aligned
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  auto upload = [&] {
    auto hq = randomBf16(qCount, rng), hk = randomBf16(kCount, rng);
    CUDA_OK(cudaMemcpyAsync(q, hq.data(), qCount * 2, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(k, hk.data(), kCount * 2, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
  };
  auto download = [&] {
    std::vector<int32_t> sel(kKeys * kTopK);
    CUDA_OK(cudaMemcpyAsync(sel.data(), out, outBytes, cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    return sel;
  };

  char error[256];
  PisaCall call = {stream, workspace, workspaceBytes, error, sizeof(error)};
  int failures = 0;

  // A direct call.
  upload();
  if (int status = pisa_prefill_select(&call, q, k, out)) {
    std::printf("FAIL call: status %d: %s\n", status, error);
    return 1;
  }
  std::vector<int32_t> direct = download();
  int bad = invalidRows(direct);
  std::printf("%s direct call: %d invalid rows of %lld\n", bad ? "FAIL" : "ok",
              bad, (long long)kKeys);
  failures += bad != 0;

  // Captured once, replayed on new inputs: equal to a direct call on them.
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  int captured = pisa_prefill_select(&call, q, k, out);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  if (captured) {
    std::printf("FAIL capture: status %d: %s\n", captured, error);
    return 1;
  }
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    upload();
    CUDA_OK(cudaMemsetAsync(out, 0x7f, outBytes, stream));
    CUDA_OK(cudaGraphLaunch(exec, stream));
    std::vector<int32_t> replayed = download();
    if (pisa_prefill_select(&call, q, k, out)) {
      std::printf("FAIL call: %s\n", error);
      return 1;
    }
    bool same = replayed == download();
    std::printf("%s graph replay %d on new inputs %s a direct call\n",
                same ? "ok  " : "FAIL", replay, same ? "equals" : "differs from");
    failures += !same;
  }

  // A bad call is refused before anything runs: the result is untouched.
  CUDA_OK(cudaMemsetAsync(out, 0x7f, outBytes, stream));
  PisaCall small = call;
  small.workspace_bytes = workspaceBytes ? workspaceBytes - 1 : 0;
  int status = workspaceBytes ? pisa_prefill_select(&small, q, k, out)
                              : pisa_prefill_select(&call, q, nullptr, out);
  std::vector<int32_t> untouched = download();
  bool refused = status != PISA_OK && untouched[0] == 0x7f7f7f7f;
  std::printf("%s bad call refused (status %d): %s\n", refused ? "ok  " : "FAIL",
              status, error);
  failures += !refused;

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(q);
  cudaFree(k);
  cudaFree(out);
  cudaFree(workspace);
  std::printf("aot-call: %s\n", failures ? "FAILED" : "all ok");
  return failures ? 1 : 0;
}
