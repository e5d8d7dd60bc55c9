// RUN: pisa-opt %s --pisa-lower-to-nvvm-pipeline="format=isa chip=sm_90" | FileCheck %s --enable-var-scope
// RUN: pisa-opt %s --pisa-lower-to-nvvm-pipeline="format=isa" | FileCheck %s --enable-var-scope --check-prefix=SM90A

// The whole GPU path without a GPU: ops without a schedule are scheduled,
// kernels are lowered to NVVM and serialised for sm_90 (PTX text here; the
// cubin needs ptxas, see test/Tools/pisa-compile.test), host code is LLVM.

// CHECK-NOT: pisa.
// CHECK-NOT: tensor<
// CHECK-LABEL: llvm.func @prefill
// CHECK: llvm.call @mgpuStreamCreate
// CHECK: llvm.call @mgpuMemAlloc
// CHECK: gpu.launch_func <%[[STREAM:.*]] : !llvm.ptr> @pisa_kernels::@pyramid_leaves
// CHECK: gpu.launch_func <%[[STREAM]] : !llvm.ptr> @pisa_kernels::@select_stage1_walk
// CHECK: gpu.launch_func <%[[STREAM]] : !llvm.ptr> @pisa_kernels::@select_stage2_score_tiles_mma
// CHECK: gpu.launch_func <%[[STREAM]] : !llvm.ptr> @pisa_kernels::@select_final
// CHECK: llvm.call @mgpuMemFree
// CHECK: llvm.call @mgpuStreamSynchronize
// CHECK-LABEL: llvm.func @_mlir_ciface_prefill
// CHECK: gpu.binary @pisa_kernels [#gpu.object<#nvvm.target<chip = "sm_90", features = "+ptx80">
// CHECK-SAME: .target sm_90
// CHECK-SAME: .entry select_stage1_walk
// CHECK-SAME: .entry select_stage2_score_tiles_mma
// CHECK-SAME: .shared .align 16 .b8 __wg_select_stage2_score_tiles_mma_0[2560]
// CHECK-SAME: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK-SAME: ldmatrix.sync.aligned.m8n8.x2.shared.b16
// CHECK-SAME: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
//   The default chip is sm_90a; this shape (4 queries x G = 4 is not a
//   64-row tile) keeps the mma.sync scorer there too.
// SM90A: #nvvm.target<chip = "sm_90a"
// SM90A-SAME: .target sm_90a
// SM90A-SAME: .entry select_stage2_score_tiles_mma
func.func @prefill(%q: tensor<1x4x300x32xbf16>, %k: tensor<1x1x300x32xbf16>)
    -> tensor<1x1x300x4xi32> attributes {llvm.emit_c_interface} {
  %off = arith.constant 0 : index
  %p = pisa.pyramid_build %k block_size = 16 branching = 2
      : tensor<1x1x300x32xbf16> -> tensor<1x1x40x32xf32>
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 16 branching = 2
      : tensor<1x4x300x32xbf16>, tensor<1x1x300x32xbf16>, tensor<1x1x40x32xf32>
      -> tensor<1x1x300x4xi32>
  return %s : tensor<1x1x300x4xi32>
}
