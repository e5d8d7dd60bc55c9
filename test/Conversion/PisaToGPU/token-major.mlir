// RUN: pisa-opt %s --pisa-select-schedule --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope

// Token-major queries, keys and selection ([B, T, H, X]) are read and
// written in place: each kernel gets a transposed [B, H, T, X] view
// (memref.transpose, strided) of the caller's buffer, never a copy.

// CHECK-LABEL: func.func @select
// CHECK-SAME: (%[[Q:.*]]: memref<?x?x16x128xbf16>, %[[K:.*]]: memref<?x?x1x128xbf16>, %[[OFF:.*]]: index)
// CHECK-NOT: memref.copy
// CHECK-NOT: linalg.
// CHECK: %[[KV:.*]] = memref.transpose %[[K]] (d0, d1, d2, d3) -> (d0, d2, d1, d3) : memref<?x?x1x128xbf16> to memref<?x1x?x128xbf16, strided<[?, 128, 128, 1]>>
// CHECK: gpu.launch_func @pisa_kernels::@pyramid_leaves {{.*}} args(%[[KV]] : memref<?x1x?x128xbf16, strided<[?, 128, 128, 1]>>
// CHECK: %[[SEL:.*]] = gpu.alloc (%{{.*}}, %{{.*}}) : memref<?x?x1x8xi32>
// CHECK: %[[QV:.*]] = memref.transpose %[[Q]] (d0, d1, d2, d3) -> (d0, d2, d1, d3) : memref<?x?x16x128xbf16> to memref<?x16x?x128xbf16, strided<[?, 128, 2048, 1]>>
// CHECK: gpu.launch_func @pisa_kernels::@select_stage1_walk {{.*}} args(%[[QV]] : memref<?x16x?x128xbf16, strided<[?, 128, 2048, 1]>>
// CHECK: gpu.launch_func @pisa_kernels::@select_stage2_score_tiles_wgmma {{.*}} args(%[[QV]] : {{.*}}, %[[KV]] :
// CHECK: %[[SV:.*]] = memref.transpose %[[SEL]] (d0, d1, d2, d3) -> (d0, d2, d1, d3) : memref<?x?x1x8xi32> to memref<?x1x?x8xi32, strided<[?, 8, 8, 1]>>
// CHECK: gpu.launch_func @pisa_kernels::@select_final {{.*}}, %[[SV]] : memref<?x1x?x8xi32, strided<[?, 8, 8, 1]>>
// CHECK: return %[[SEL]] : memref<?x?x1x8xi32>
func.func @select(%q: tensor<?x?x16x128xbf16>, %k: tensor<?x?x1x128xbf16>, %off: index) -> tensor<?x?x1x8xi32> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 {token_major} : tensor<?x?x1x128xbf16> -> tensor<?x1x?x128xf32>
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 {token_major}
      : tensor<?x?x16x128xbf16>, tensor<?x?x1x128xbf16>, tensor<?x1x?x128xf32> -> tensor<?x?x1x8xi32>
  return %s : tensor<?x?x1x8xi32>
}

// Decode (single stage), static: the same views.
// CHECK-LABEL: func.func @decode
// CHECK: memref.transpose
// CHECK: gpu.launch_func @pisa_kernels::@select_single_stage {{.*}} args(%{{.*}} : memref<1x16x1x128xbf16, strided<[2048, 128, 2048, 1]>>
//   The kernels take the views' strided types.
// CHECK: gpu.func @select_stage1_walk(%{{.*}}: memref<?x16x?x128xbf16, strided<[?, 128, 2048, 1]>>
func.func @decode(%q: tensor<1x1x16x128xbf16>, %k: tensor<1x4096x1x128xbf16>, %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x1x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 {token_major}
      : tensor<1x1x16x128xbf16>, tensor<1x4096x1x128xbf16>, tensor<1x1x127x128xf32> -> tensor<1x1x1x8xi32>
  return %s : tensor<1x1x1x8xi32>
}
