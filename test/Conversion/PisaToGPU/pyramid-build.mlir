// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --convert-pisa-to-gpu --canonicalize | FileCheck %s --enable-var-scope

// 200 keys, C = 64, g = 2: the leaf kernel over 4 blocks, then the level
// kernel for 2 nodes and for the root, each a block of d = 16 threads per
// (node, batch x KV head). The pyramid is not returned, so it is freed.

// CHECK-LABEL: func.func @pyramid_then_select
// CHECK-SAME: %[[KB:[a-z0-9]+]]: memref<1x2x200x16xf16>)
// CHECK: %[[PYR:.*]] = gpu.alloc () : memref<1x2x7x16xf32>
// CHECK: gpu.launch_func @pisa_kernels::@pyramid_leaves blocks in (%c4, %c2, %c1) threads in (%c16,
// CHECK-SAME: args(%[[KB]] : memref<1x2x200x16xf16>, %[[PYR]] : memref<1x2x7x16xf32>)
// CHECK: gpu.launch_func @pisa_kernels::@pyramid_level blocks in (%c2, %c2, %c1) {{.*}} args(%[[PYR]] : memref<1x2x7x16xf32>, %c0 : index, %c4 : index, %c4 : index)
// CHECK: gpu.launch_func @pisa_kernels::@pyramid_level blocks in (%c1, %c2, %c1) {{.*}} args(%[[PYR]] : memref<1x2x7x16xf32>, %c4 : index, %c6 : index, %c2 : index)
// CHECK: %[[SEL:.*]] = gpu.alloc () : memref<1x2x1x4xi32>
// CHECK: gpu.launch_func @pisa_kernels::@select_single_stage
// CHECK: gpu.dealloc %[[PYR]]
// CHECK-NEXT: return %[[SEL]]
// CHECK: gpu.func @pyramid_leaves
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: arith.divf
// CHECK: gpu.func @pyramid_level
func.func @pyramid_then_select(%q: tensor<1x4x1x16xf16>, %k: tensor<1x2x200x16xf16>)
    -> tensor<1x2x1x4xi32> {
  %t = arith.constant 199 : index
  %p = pisa.pyramid_build %k block_size = 64 branching = 2
      : tensor<1x2x200x16xf16> -> tensor<1x2x7x16xf32>
  %s = pisa.hier_topk %q, %k, %p, %t topk = 4 block_size = 64 branching = 2
      {schedule = #pisa.schedule<single_stage, q_tile = 4, io_two_stage = 0, io_single_stage = 0>}
      : tensor<1x4x1x16xf16>, tensor<1x2x200x16xf16>, tensor<1x2x7x16xf32>
      -> tensor<1x2x1x4xi32>
  return %s : tensor<1x2x1x4xi32>
}
