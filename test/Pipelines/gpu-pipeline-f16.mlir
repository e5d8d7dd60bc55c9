// RUN: pisa-opt %s --pisa-lower-to-nvvm-pipeline="format=isa" | FileCheck %s --enable-var-scope

// f16 inputs take the same tensor-core scorer as bf16: the warp tile
// product goes vector.contract -> nvgpu.ldmatrix/mma.sync -> upstream
// convert-nvgpu-to-nvvm -> PTX mma.sync on f16.

// CHECK: gpu.binary @pisa_kernels
// CHECK-SAME: .entry select_stage2_score_tiles_mma
// CHECK-SAME: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK-SAME: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
func.func @prefill_f16(%q: tensor<1x4x300x32xf16>, %k: tensor<1x1x300x32xf16>)
    -> tensor<1x1x300x4xi32> attributes {llvm.emit_c_interface} {
  %off = arith.constant 0 : index
  %p = pisa.pyramid_build %k block_size = 16 branching = 2
      : tensor<1x1x300x32xf16> -> tensor<1x1x40x32xf32>
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 16 branching = 2
      : tensor<1x4x300x32xf16>, tensor<1x1x300x32xf16>, tensor<1x1x40x32xf32>
      -> tensor<1x1x300x4xi32>
  return %s : tensor<1x1x300x4xi32>
}
