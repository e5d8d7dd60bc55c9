// RUN: pisa-opt %s --pisa-decompose-to-kernels | FileCheck %s --check-prefix=KERNELS --enable-var-scope
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope

// Packed sparse attention on the GPU (docs/semantics.md section 7, docs/gpu.md
// "Varlen"): the batched kernel on the packed batch seen as a token-major
// batch of one, each query row finding its sequence on the device. @attend
// (G = 4, d = dv = 64, C = 64) takes the register kernel, @attend_staged
// (G = 32) the staged one.

// The host checks what sizes alone decide; the reshapes are views.
// KERNELS-LABEL: func.func @attend(
// KERNELS-SAME: %[[Q:[a-z0-9]+]]: tensor<?x4x64xbf16>, %[[K:[a-z0-9]+]]: tensor<?x1x64xbf16>, %[[V:[a-z0-9]+]]: tensor<?x1x64xbf16>, %[[S:[a-z0-9]+]]: tensor<?x1x8xi32>, %[[CQ:[a-z0-9]+]]: tensor<?xi32>, %[[CK:[a-z0-9]+]]: tensor<?xi32>)
// KERNELS: cf.assert %{{.*}}, "pisa.sparse_attention_varlen: cu_seqlens_k is empty (it holds B + 1 >= 1 entries)"
// KERNELS: cf.assert %{{.*}}, "pisa.sparse_attention_varlen: cu_seqlens_q and cu_seqlens_k give different B"
// KERNELS: cf.assert %{{.*}}, "pisa.sparse_attention_varlen: the values' Tk differs from the keys'"
// KERNELS: cf.assert %{{.*}}, "pisa.sparse_attention_varlen: the selection's Tq differs from the queries'"
// KERNELS: cf.assert %{{.*}}, "pisa.sparse_attention_varlen: Tq is above the GPU limit of 2147483647 (grid x)"
// KERNELS: %[[QB:.*]] = tensor.expand_shape %[[Q]] {{\[}}[0, 1], [2], [3]] {{.*}} : tensor<?x4x64xbf16> into tensor<1x?x4x64xbf16>
// KERNELS: %[[KB:.*]] = tensor.expand_shape %[[K]] {{\[}}[0, 1], [2], [3]]
// KERNELS: %[[O:.*]]:2 = pisa.kernel.sparse_attention %[[QB]], %[[KB]], %{{.*}}, %{{.*}}, %{{.*}} cu_seqlens(%[[CQ]], %[[CK]] : tensor<?xi32>, tensor<?xi32>) outs(%{{.*}}, %{{.*}}) block_size = 64 scale = 1.250000e-01 {token_major} : tensor<1x?x4x64xbf16>
// KERNELS-DAG: tensor.collapse_shape %[[O]]#0 {{\[}}[0, 1], [2], [3]] : tensor<1x?x4x64xbf16> into tensor<?x4x64xbf16>
// KERNELS-DAG: tensor.collapse_shape %[[O]]#1 {{\[}}[0, 1], [2]] : tensor<1x?x4xf32> into tensor<?x4xf32>

// Four packed query rows a block (the register kernel), cu_seqlens passed.
// CHECK-LABEL: func.func @attend(
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention blocks in (%{{.*}}, %c1, %c1) threads in (%c128, %c1, %c1) {{.*}} args({{.*}}, %arg4 : memref<?xi32>, %arg5 : memref<?xi32>)

// CHECK-LABEL: func.func @attend_staged(
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention_0 blocks in (%{{.*}}, %c1, %c1) threads in (%c128, %c1, %c1) {{.*}} args({{.*}}, %arg4 : memref<?xi32>, %arg5 : memref<?xi32>)

// Each query row finds its sequence by a binary search of cu_seqlens_q,
// checks the batch's rules over cu_seqlens, reads its keys from cu_k[b]
// and writes NaN rows when the rules are broken.
// CHECK: gpu.func @sparse_attention(
// CHECK-SAME: %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi32>) kernel
// CHECK-DAG: arith.constant 0x7FC00000 : f32
// CHECK: scf.while
// CHECK: scf.for
// CHECK: nvgpu.mma.sync
// CHECK: gpu.func @sparse_attention_0(
// CHECK-SAME: %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi32>) kernel
// CHECK-DAG: arith.constant 0x7FC00000 : f32
// CHECK: scf.while

func.func @attend(%q: tensor<?x4x64xbf16>, %k: tensor<?x1x64xbf16>, %v: tensor<?x1x64xbf16>, %s: tensor<?x1x8xi32>, %cq: tensor<?xi32>, %ck: tensor<?xi32>) -> (tensor<?x4x64xbf16>, tensor<?x4xf32>) {
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) block_size = 64 : tensor<?x4x64xbf16>, tensor<?x1x64xbf16>, tensor<?x1x64xbf16>, tensor<?x1x8xi32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x4x64xbf16>, tensor<?x4xf32>
  return %o, %l : tensor<?x4x64xbf16>, tensor<?x4xf32>
}

func.func @attend_staged(%q: tensor<?x32x64xf16>, %k: tensor<?x1x64xf16>, %v: tensor<?x1x64xf16>, %s: tensor<?x1x8xi32>, %cq: tensor<?xi32>, %ck: tensor<?xi32>) -> (tensor<?x32x64xf16>, tensor<?x32xf32>) {
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) block_size = 64 : tensor<?x32x64xf16>, tensor<?x1x64xf16>, tensor<?x1x64xf16>, tensor<?x1x8xi32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x32x64xf16>, tensor<?x32xf32>
  return %o, %l : tensor<?x32x64xf16>, tensor<?x32xf32>
}
