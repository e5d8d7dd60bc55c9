// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu | FileCheck %s --enable-var-scope

// G = 8: a warp's 32 rows are four queries' heads, not whole 16-row mma
// tiles of one query, so the stage-2 product goes to a score tile in shared
// memory and the LSEs are computed there. Score rows are 72 words apart (8
// mod 32: the fragment stores are conflict-free); each lane reads its row
// as 16 chunks of 4, lanes with bit 2 set one chunk later, so the eight
// lanes of a 16-byte access cover all 32 banks.
// CHECK: gpu.func @select_stage2_score_tiles_mma({{.*}}) workgroup(%[[SMEM:.*]] : memref<26624xi8, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[ROWS:.*]] : memref<32xf32, #gpu.address_space<workgroup>>)
// CHECK: %[[ST:.*]] = memref.view %[[SMEM]][%c0{{.*}}][] : {{.*}} to memref<32x72xf32, #gpu.address_space<workgroup>>
// CHECK: %[[P:.*]] = vector.contract {{.*}} : vector<32x128xbf16>, vector<64x128xbf16> into vector<32x64xf32>
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: vector.transfer_write %[[P]], %[[ST]]
// CHECK: gpu.barrier
// CHECK: %[[SHIFT:.*]] = arith.remui %{{.*}}, %c2
// CHECK: arith.addi %[[SHIFT]], %c0
// CHECK: vector.load %[[ST]]{{.*}} : memref<32x72xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-COUNT-15: vector.load %[[ST]]{{.*}} : memref<32x72xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: vector.shuffle {{.*}} : vector<32xf32>, vector<32xf32>
// CHECK: arith.remui {{.*}} : vector<64xi32>
// CHECK: arith.cmpi slt, {{.*}} : vector<64xi32>
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<64xf32>
// CHECK: vector.reduction <maximumf>, %{{.*}} fastmath<reassoc>
// CHECK-NOT: gpu.shuffle
// CHECK: math.exp2 %{{.*}} fastmath<afn> : vector<64xf32>
// CHECK: vector.reduction <add>, %{{.*}} fastmath<reassoc>
// CHECK: math.log2
// CHECK: memref.store %{{.*}}, %[[ROWS]]
// CHECK: gpu.barrier
// CHECK: vector.load %[[ROWS]]{{.*}} vector<8xf32>
// CHECK: vector.reduction <add>
func.func @prefill_g8(%q: tensor<1x8x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                      %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x4096x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 4096, io_single_stage = 8192>}
      : tensor<1x8x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}
