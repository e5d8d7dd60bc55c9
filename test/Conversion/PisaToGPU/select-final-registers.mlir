// RUN: pisa-opt %s %lower_to_gpu | FileCheck %s --enable-var-scope

// select_final holds a row's contenders in registers when their bound g*K
// is at most 32: every contender's block and score loaded at once, ranks
// as unrolled comparisons (an earlier contender beats an equal score:
// oge; a later one must be higher: ogt), no private kept list. Past 32 it
// ranks them in place through a private [K] list.

// CHECK-LABEL: gpu.func @select_final(
// CHECK-SAME: memref<1x1x4096x16xi32>
// CHECK-NOT: private(
// CHECK-SAME: kernel {
// CHECK-COUNT-16: memref.load %{{.*}} : memref<1x1x4096x16xf32>
// CHECK: arith.cmpf ogt
// CHECK-NOT: scf.for
// CHECK: arith.cmpf oge
// CHECK: gpu.return
func.func @paper(%q: tensor<1x16x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                 %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x4096x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 0, io_single_stage = 0>}
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}

// CHECK-LABEL: gpu.func @select_final_0(
// CHECK-SAME: memref<1x1x4096x48xi32>
// CHECK-SAME: private(%{{.*}} : memref<16xi32, #gpu.address_space<private>>)
// CHECK: scf.for
// CHECK: gpu.return
func.func @wide(%q: tensor<1x4x4096x64xbf16>, %k: tensor<1x1x4096x64xbf16>,
                %p: tensor<1x1x194x64xf32>, %off: index) -> tensor<1x1x4096x16xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 16 block_size = 32 branching = 3
      {schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 0, io_single_stage = 0>}
      : tensor<1x4x4096x64xbf16>, tensor<1x1x4096x64xbf16>, tensor<1x1x194x64xf32>
      -> tensor<1x1x4096x16xi32>
  return %s : tensor<1x1x4096x16xi32>
}
