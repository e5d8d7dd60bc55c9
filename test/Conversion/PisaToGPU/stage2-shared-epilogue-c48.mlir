// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu | FileCheck %s --enable-var-scope

// The stage-2 shared-memory epilogue (G = 8, 32-row warps) with C = 48:
// twelve chunks of 4 per row, not a power of two; the chunks are joined
// pairwise with the odd one carried (32 + 16 columns of the row).
// CHECK: gpu.func @select_stage2_score_tiles_mma
// CHECK: memref.view {{.*}} to memref<32x72xf32, #gpu.address_space<workgroup>>
// CHECK-COUNT-12: vector.load {{.*}} : memref<32x72xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: vector.shuffle {{.*}} : vector<16xf32>, vector<16xf32>
// CHECK-NEXT: vector.shuffle {{.*}} : vector<32xf32>, vector<16xf32>
// CHECK: arith.remui {{.*}} : vector<48xi32>
func.func @prefill_g8_c48(%q: tensor<1x8x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                          %p: tensor<1x1x174x128xf32>, %off: index) -> tensor<1x1x4096x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 48 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 4096, io_single_stage = 8192>}
      : tensor<1x8x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x174x128xf32>
      -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}
