// RUN: pisa-opt %s --pisa-lower-to-nvvm-pipeline="format=isa" | FileCheck %s --enable-var-scope

// A prefill whose selection scores tiles on mma.sync with a register row
// epilogue and whose attention takes the staged kernel (G = 16, d = 96,
// dv = 256, C = 128): --pisa-vector-to-mma-sync rewrites each kernel on
// its own: scoped to the whole kernel module, the rewrite let one kernel's
// values reach another's ops ("using value defined outside the region").

// CHECK: gpu.binary @pisa_kernels
// CHECK-SAME: .entry select_stage2_score_tiles_mma
// CHECK-SAME: .entry sparse_attention
// CHECK-SAME: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
func.func @prefill(%q: tensor<?x48x?x96xf16>, %k: tensor<?x3x?x96xf16>, %v: tensor<?x3x?x256xf16>, %off: index) -> tensor<?x48x?x256xf16> {
  %p = pisa.pyramid_build %k block_size = 128 branching = 2 : tensor<?x3x?x96xf16> -> tensor<?x3x?x96xf32>
  %s = pisa.hier_topk %q, %k, %p, %off topk = 10 block_size = 128 branching = 2
      : tensor<?x48x?x96xf16>, tensor<?x3x?x96xf16>, tensor<?x3x?x96xf32> -> tensor<?x3x?x10xi32>
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 128
      : tensor<?x48x?x96xf16>, tensor<?x3x?x96xf16>, tensor<?x3x?x256xf16>, tensor<?x3x?x10xi32> -> tensor<?x48x?x256xf16>, tensor<?x48x?xf32>
  return %o : tensor<?x48x?x256xf16>
}
