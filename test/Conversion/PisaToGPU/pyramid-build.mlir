// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize | FileCheck %s --enable-var-scope

// 200 keys, C = 64, g = 2: the leaf kernel over 4 blocks, a block of
// d = 16 threads per (leaf, batch x KV head); then every upper level (2
// nodes, the root) in one launch of the top-levels kernel, a block of 1024
// threads (64 nodes x d at a time) per (batch, KV head), starting from the
// leaves (row 0, 4 nodes). The pyramid is not returned, so it is freed.

// CHECK-LABEL: func.func @pyramid_then_select
// CHECK-SAME: %[[KB:[a-z0-9]+]]: memref<1x2x200x16xf16>)
// CHECK: %[[PYR:.*]] = gpu.alloc () : memref<1x2x7x16xf32>
// CHECK: gpu.launch_func @pisa_kernels::@pyramid_leaves blocks in (%c4, %c2, %c1) threads in (%c16,
// CHECK-SAME: args(%[[KB]] : memref<1x2x200x16xf16>, %[[PYR]] : memref<1x2x7x16xf32>)
// CHECK-NOT: @pyramid_level
// CHECK: gpu.launch_func @pisa_kernels::@pyramid_top_levels blocks in (%c1, %c2, %c1) threads in (%c1024, %c1, %c1) args(%[[PYR]] : memref<1x2x7x16xf32>, %c0 : index, %c4 : index)
// CHECK: %[[SEL:.*]] = gpu.alloc () : memref<1x2x1x4xi32>
// CHECK: gpu.launch_func @pisa_kernels::@select_single_stage
// CHECK: gpu.dealloc %[[PYR]]
// CHECK-NEXT: return %[[SEL]]
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

// 8192 keys, C = 64, d = 128: 128 leaves; level 2 (64 nodes) is wider than
// the top-levels kernel takes (8 rows x 4 passes = 32 nodes for d = 128),
// so it has its own launch; levels 3 to 8 (32 nodes .. the root) are one
// launch that starts from it (row 128, 64 nodes).
// CHECK-LABEL: func.func @wide_pyramid
// CHECK: gpu.launch_func @pisa_kernels::@pyramid_leaves_0 blocks in (%c128, %c1, %c1) threads in (%c128,
// CHECK-NEXT: gpu.launch_func @pisa_kernels::@pyramid_level_0 blocks in (%c64, %c1, %c1) threads in (%c128, %c1, %c1) args(%{{.*}} : memref<1x1x255x128xf32>, %c0 : index, %c128 : index, %c128 : index)
// CHECK-NEXT: gpu.launch_func @pisa_kernels::@pyramid_top_levels_0 blocks in (%c1, %c1, %c1) threads in (%c1024, %c1, %c1) args(%{{.*}} : memref<1x1x255x128xf32>, %c128 : index, %c64 : index)
func.func @wide_pyramid(%k: tensor<1x1x8192x128xbf16>) -> tensor<1x1x255x128xf32> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2
      : tensor<1x1x8192x128xbf16> -> tensor<1x1x255x128xf32>
  return %p : tensor<1x1x255x128xf32>
}

// The kernels: means in f32; the top levels loop over the levels with a
// barrier after each, nodes strided by the block's rows.
// CHECK: gpu.func @pyramid_leaves
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: arith.divf
// CHECK: gpu.func @pyramid_level
// CHECK: gpu.func @pyramid_top_levels
// CHECK: scf.for
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c64
// CHECK: arith.divf
// CHECK: gpu.barrier
