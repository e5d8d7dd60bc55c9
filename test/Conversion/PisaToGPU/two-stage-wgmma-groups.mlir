// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu | FileCheck %s --enable-var-scope

// Which group sizes the wgmma scorer takes (sm_90a): a 64-row tile of
// q_tile x G rows with G = 8 (two queries a warp: each half of the warp's
// rows sums its own 8 heads) runs on wgmma; G = 4 at q_tile 16 keeps the
// mma.sync scorer (not yet checked on the GPU with wgmma).

// CHECK-LABEL: func.func @g8
// CHECK: gpu.launch_func @pisa_kernels::@select_stage2_score_tiles_wgmma {{.*}} threads in ({{%c128(_[0-9]+)?}}
// CHECK-LABEL: func.func @g4
// CHECK: gpu.launch_func @pisa_kernels::@select_stage2_score_tiles_mma
// CHECK-NOT: gpu.launch_func @pisa_kernels::@select_stage2_score_tiles_wgmma
//   G = 8: each row half (quad rows g, g + 8) is a query's head g; its 8
//   heads sum over the lanes 4, 8 and 16 apart, both halves separately.
// CHECK: gpu.func @select_stage2_score_tiles_wgmma
// CHECK: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>]
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: gpu.shuffle  xor %{{.*}}, %c4_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c8_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32
// CHECK: memref.store
// CHECK: gpu.shuffle  xor %{{.*}}, %c4_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c8_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32
// CHECK: memref.store
func.func @g8(%q: tensor<1x8x2048x128xbf16>, %k: tensor<1x1x2048x128xbf16>,
              %p: tensor<1x1x63x128xf32>, %off: index) -> tensor<1x1x2048x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 8, io_two_stage = 0, io_single_stage = 0>}
      : tensor<1x8x2048x128xbf16>, tensor<1x1x2048x128xbf16>, tensor<1x1x63x128xf32>
      -> tensor<1x1x2048x8xi32>
  return %s : tensor<1x1x2048x8xi32>
}
func.func @g4(%q: tensor<1x4x2048x128xbf16>, %k: tensor<1x1x2048x128xbf16>,
              %p: tensor<1x1x63x128xf32>, %off: index) -> tensor<1x1x2048x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 16, io_two_stage = 0, io_single_stage = 0>}
      : tensor<1x4x2048x128xbf16>, tensor<1x1x2048x128xbf16>, tensor<1x1x63x128xf32>
      -> tensor<1x1x2048x8xi32>
  return %s : tensor<1x1x2048x8xi32>
}
