// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu | FileCheck %s --enable-var-scope

// K = 16 at G = 16, bf16: g*K = 32 candidates, one per lane, so the walk
// still scores its levels on tensor cores (the SIMT walk would read no
// bf16 A fragments and issue no mma.sync). Four n-tiles of 8 children per
// k-step, each with a high and a low half.
// CHECK: gpu.func @select_stage1_walk
// CHECK: vector.load %arg0{{.*}} : memref<1x16x4096x128xbf16>, vector<2xbf16>
// CHECK: nvvm.vote.sync  ballot
// CHECK-COUNT-8: nvgpu.mma.sync
// CHECK: gpu.func @select_stage2_score_tiles_wgmma
func.func @prefill_k16(%q: tensor<1x16x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                       %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x4096x16xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 16 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 4096, io_single_stage = 8192>}
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x4096x16xi32>
  return %s : tensor<1x1x4096x16xi32>
}
