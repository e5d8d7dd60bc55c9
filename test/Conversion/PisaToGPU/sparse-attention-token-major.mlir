// RUN: pisa-opt %s --pisa-decompose-to-kernels | FileCheck %s --enable-var-scope --check-prefix=KERNELS
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope

// Token-major (fla's and FlashAttention's [B, T, H, X]; lse [B, Nq, Hq]):
// the same kernel reads and writes every operand through transposed views,
// no copy.
// KERNELS-LABEL: func.func @attend_token_major
// KERNELS: pisa.kernel.sparse_attention {{.*}} block_size = 64 scale = 0.0883883461 {token_major}
// CHECK-LABEL: func.func @attend_token_major
// CHECK-DAG: memref.transpose %{{.*}} (d0, d1, d2, d3) -> (d0, d2, d1, d3) : memref<?x?x32x128xbf16> to memref<?x32x?x128xbf16, strided<[?, 128, 4096, 1]>>
// CHECK-DAG: memref.transpose %{{.*}} (d0, d1, d2, d3) -> (d0, d2, d1, d3) : memref<?x?x2x64xbf16> to memref<?x2x?x64xbf16, strided<[?, 64, 128, 1]>>
// CHECK-DAG: memref.transpose %{{.*}} (d0, d1, d2) -> (d0, d2, d1) : memref<?x?x32xf32> to memref<?x32x?xf32, strided<[?, 1, 32]>>
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention
// CHECK-NOT: memref.copy
func.func @attend_token_major(%q: tensor<?x?x32x128xbf16>, %k: tensor<?x?x2x128xbf16>,
                              %v: tensor<?x?x2x64xbf16>, %s: tensor<?x?x2x8xi32>, %off: index)
    -> (tensor<?x?x32x64xbf16>, tensor<?x?x32xf32>) {
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 64 {token_major}
      : tensor<?x?x32x128xbf16>, tensor<?x?x2x128xbf16>, tensor<?x?x2x64xbf16>,
        tensor<?x?x2x8xi32> -> tensor<?x?x32x64xbf16>, tensor<?x?x32xf32>
  return %o, %l : tensor<?x?x32x64xbf16>, tensor<?x?x32xf32>
}
// CHECK: gpu.func @sparse_attention(%{{.*}}: memref<?x32x?x128xbf16, strided<[?, 128, 4096, 1]>>
