// RUN: pisa-opt %s --convert-pisa-to-gpu | FileCheck %s --enable-var-scope

// Prefill at the paper's setting (N = 4096, C = 64: 64 leaves, g*K = 16):
// six kernels, stage-2 key tiles in shared memory, and no buffer shaped
// Nq x (number of leaves).

// CHECK-LABEL: func.func @prefill
// CHECK-SAME: (%[[Q:.*]]: tensor<1x16x4096x128xbf16>, %[[K:.*]]: tensor<1x1x4096x128xbf16>, %[[P:.*]]: tensor<1x1x127x128xf32>, %[[OFF:.*]]: index)
// CHECK-DAG: %[[QB:.*]] = bufferization.to_buffer %[[Q]] read_only
// CHECK-DAG: %[[KB:.*]] = bufferization.to_buffer %[[K]] read_only
// CHECK-DAG: %[[PB:.*]] = bufferization.to_buffer %[[P]] read_only
// CHECK: %[[SEL:.*]] = gpu.alloc () : memref<1x1x4096x8xi32>
// CHECK: %[[CONT:.*]] = gpu.alloc () : memref<1x1x4096x16xi32>
// CHECK: %[[COUNT:.*]] = gpu.alloc () : memref<1x1x4096xi32>
// CHECK: %[[SCORES:.*]] = gpu.alloc () : memref<1x1x4096x16xf32>
// CHECK: %[[LEAFCOUNT:.*]] = gpu.alloc () : memref<1x1x64xi32>
// CHECK: gpu.launch_func @pisa_kernels::@select_stage1_walk {{.*}} args(%[[QB]] : {{.*}}, %[[PB]] : {{.*}}, %[[OFF]] : index, %[[CONT]] : {{.*}}, %[[COUNT]] :
// CHECK: gpu.memset %[[LEAFCOUNT]]
// CHECK: gpu.launch_func @pisa_kernels::@select_stage2_histogram
// CHECK: gpu.launch_func @pisa_kernels::@select_stage2_scan
// CHECK: gpu.launch_func @pisa_kernels::@select_stage2_scatter
// CHECK: gpu.launch_func @pisa_kernels::@select_stage2_score_tiles_mma {{.*}} threads in (%c128
// CHECK-SAME: args(%[[QB]] : {{.*}}, %[[KB]] :
// CHECK: gpu.launch_func @pisa_kernels::@select_final {{.*}} args(%[[OFF]] : index, %[[CONT]] : {{.*}}, %[[COUNT]] : {{.*}}, %[[SCORES]] : {{.*}}, %[[SEL]] :
// CHECK: gpu.dealloc %[[CONT]]
// CHECK: %[[R:.*]] = bufferization.to_tensor %[[SEL]] restrict
// CHECK: return %[[R]]

// CHECK: gpu.module @pisa_kernels
// CHECK: gpu.func @select_stage1_walk({{.*}}) private({{.*}} : memref<16xi32, #gpu.address_space<private>>, {{.*}} : memref<8xi32, #gpu.address_space<private>>, {{.*}} : memref<16xf32, #gpu.address_space<private>>) kernel
// CHECK: gpu.func @select_final
// CHECK: gpu.func @select_stage2_histogram
// CHECK: memref.atomic_rmw addi
// CHECK: gpu.func @select_stage2_scan
// CHECK: gpu.func @select_stage2_scatter
// CHECK: memref.atomic_rmw addi
//   bf16: one block of 4 warps per tile of <= 4 queries x 16 heads (64 rows,
//   16 per warp); the leaf's C x d keys are loaded once into workgroup
//   memory in bf16 and the 64 x 128 x 64 tile product runs on tensor cores.
// CHECK: gpu.func @select_stage2_score_tiles_mma({{.*}}) workgroup(%[[TILE:.*]] : memref<64x128xbf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[ROWS:.*]] : memref<128xf32, #gpu.address_space<workgroup>>) kernel
// CHECK: memref.store %{{.*}}, %[[TILE]]
// CHECK: gpu.barrier
// CHECK: vector.load %[[TILE]]{{.*}} : memref<64x128xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK-COUNT-8: nvvm.mma.sync {{.*}} {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// CHECK: gpu.shuffle xor
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %[[ROWS]]
// CHECK: gpu.barrier
// CHECK-NOT: x4096x64x
// CHECK-NOT: memref<4096x64x
func.func @prefill(%q: tensor<1x16x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                   %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x4096x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 4096, io_single_stage = 8192>}
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}

