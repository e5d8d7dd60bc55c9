// RUN: pisa-opt %s --pisa-decompose-to-kernels | FileCheck %s --enable-var-scope --check-prefix=KERNELS
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope

// The backward of sparse attention at the paper's setting (G = 16, d = dv
// = 128, C = 64, K = 8, bf16), B, N and Nq dynamic: the query kernel op
// (dq and D) then the key kernel op (dk and dv), which reads D and keeps
// its query bits [B, Hkv, ceil(N / 64), ceil(Nq / 32) + 1] and the f32
// sums of its segments [B, Hkv, N, d + dv] as scratch.

// KERNELS-LABEL: func.func @grad
// KERNELS: %[[BLOCKS:.+]] = arith.ceildivui %{{.+}}, %c64
// KERNELS: %[[WORDS:.+]] = arith.ceildivui %{{.+}}, %c32
// KERNELS: %[[ROW:.+]] = arith.addi %[[WORDS]], %c1
// KERNELS: %[[BITS:.+]] = tensor.empty(%{{.+}}, %[[BLOCKS]], %[[ROW]]) : tensor<?x1x?x?xi32>
// KERNELS: %[[SUMS:.+]] = tensor.empty(%{{.+}}, %{{.+}}) : tensor<?x1x?x256xf32>
// KERNELS: %[[DQ:.+]]:2 = pisa.kernel.sparse_attention_grad_queries %arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7 outs({{.+}}) block_size = 64 scale = 0.0883883461
// KERNELS: %[[DK:.+]]:4 = pisa.kernel.sparse_attention_grad_keys %arg0, %arg1, %arg2, %arg3, %arg4, %arg6, %[[DQ]]#1, %arg7 outs({{.+}}, {{.+}}, %[[BITS]], %[[SUMS]])
// KERNELS: return %[[DQ]]#0, %[[DK]]#0, %[[DK]]#1

// CHECK-LABEL: func.func @grad
// The host checks what the verifier could not (dynamic sizes).
// CHECK: cf.assert %{{.+}}, "pisa.sparse_attention_grad: dO's Nq differs from the queries'"
// CHECK: cf.assert %{{.+}}, "pisa.sparse_attention_grad: the lse's Nq differs from the queries'"
// One block of 128 threads per (query, B x Hkv); its tiles: Q, dO, K, V,
// S, dP, dS, dQ and the block list, 63008 bytes.
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention_grad_queries blocks in (%[[NQ:.+]], %[[GROUPS:.+]], %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c63008_i32
// The bits are zeroed, then one thread per query marks the blocks it
// attends.
// CHECK: gpu.launch_func @pisa_kernels::@zero_query_bits
// CHECK: gpu.launch_func @pisa_kernels::@mark_attending_queries
// One block per (key block x segment, B x Hkv), at most 16 segments of at
// least 8 bit words; its tiles: K, V, the step's Q and dO (64 rows: 4
// queries of 16 heads), S, dP, P^T, dS^T, the dK and dV sums, a window of
// bits and the step's queries.
// CHECK: %[[SEGS:.+]] = arith.maxui %{{.+}}, %c1
// CHECK: %[[GRIDX:.+]] = arith.muli %{{.+}}, %[[SEGS]]
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention_grad_keys blocks in (%[[GRIDX]], %[[GROUPS]], %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c191232_i32

// The query kernel: S = Q K^T and dP = dO V^T (each warp 16 of the 64
// keys), then dQ += dS K (each warp 32 of d's columns).
// CHECK-LABEL: gpu.func @sparse_attention_grad_queries
// CHECK: scf.for
// CHECK: vector.contract {{.+}} : vector<16x128xbf16>, vector<16x128xbf16> into vector<16x16xf32>
// CHECK: vector.contract {{.+}} : vector<16x128xbf16>, vector<16x128xbf16> into vector<16x16xf32>
// CHECK: math.exp2
// CHECK: vector.contract {{.+}} : vector<16x64xbf16>, vector<64x32xbf16> into vector<16x32xf32>

// CHECK-LABEL: gpu.func @mark_attending_queries
// CHECK: memref.atomic_rmw ori

// The key kernel walks its segment's set bits in query order, four
// queries a step, and accumulates dV += P^T dO and dK += dS^T Q (64 keys x
// 32 columns per warp); then the segments add their sums in order: each
// waits for the block's counter to reach its index (an atomic read) and
// counts itself done after a device-scope fence.
// CHECK-LABEL: gpu.func @sparse_attention_grad_keys
// CHECK: scf.while
// CHECK: math.cttz
// CHECK: vector.contract {{.+}} : vector<64x128xbf16>, vector<16x128xbf16> into vector<64x16xf32>
// CHECK: vector.contract {{.+}} : vector<64x64xbf16>, vector<64x32xbf16> into vector<64x32xf32>
// CHECK: vector.contract {{.+}} : vector<64x64xbf16>, vector<64x32xbf16> into vector<64x32xf32>
// CHECK: scf.while
// CHECK: memref.atomic_rmw addi
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: memref.atomic_rmw assign

func.func @grad(%q: tensor<?x16x?x128xbf16>, %k: tensor<?x1x?x128xbf16>, %v: tensor<?x1x?x128xbf16>, %s: tensor<?x1x?x8xi32>, %off: index, %o: tensor<?x16x?x128xbf16>, %l: tensor<?x16x?xf32>, %do: tensor<?x16x?x128xbf16>) -> (tensor<?x16x?x128xf32>, tensor<?x1x?x128xf32>, tensor<?x1x?x128xf32>) {
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 64
    : tensor<?x16x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x8xi32>, tensor<?x16x?x128xbf16>, tensor<?x16x?xf32>, tensor<?x16x?x128xbf16> -> tensor<?x16x?x128xf32>, tensor<?x1x?x128xf32>, tensor<?x1x?x128xf32>
  return %dq, %dk, %dv : tensor<?x16x?x128xf32>, tensor<?x1x?x128xf32>, tensor<?x1x?x128xf32>
}
