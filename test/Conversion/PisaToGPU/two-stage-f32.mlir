// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu | FileCheck %s --enable-var-scope

// f32 inputs take the SIMT scorer: 64 threads, one per (query, head) row,
// each keeping its row against a 64-key chunk of f32 keys in registers.
// CHECK-LABEL: func.func @prefill_f32
// CHECK: gpu.launch_func @pisa_kernels::@select_stage2_score_tiles {{.*}} threads in (%c64
// CHECK: gpu.func @select_stage2_score_tiles({{.*}}) workgroup(%[[FTILE:.*]] : memref<64x128xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<64xf32, #gpu.address_space<workgroup>>) kernel
// CHECK: vector.load %[[FTILE]]{{.*}} {alignment = 16 : i64} : memref<64x128xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-NOT: nvvm.mma.sync
func.func @prefill_f32(%q: tensor<1x16x4096x128xf32>, %k: tensor<1x1x4096x128xf32>,
                       %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x4096x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 4096, io_single_stage = 8192>}
      : tensor<1x16x4096x128xf32>, tensor<1x1x4096x128xf32>, tensor<1x1x127x128xf32>
      -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}
