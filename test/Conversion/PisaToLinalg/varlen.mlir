// RUN: pisa-opt %s --convert-pisa-to-linalg --canonicalize --cse | FileCheck %s --enable-var-scope

// The CPU reference of a packed batch is the contract as stated: the rules
// on cu_seqlens first, then per sequence the batched op (B = 1) on its
// rows, head-major, written back token-major.

// CHECK-LABEL: func.func @select
// CHECK-SAME: (%[[Q:.*]]: tensor<?x8x64xf32>, %[[K:.*]]: tensor<?x2x64xf32>, %[[CUQ:.*]]: tensor<?xi32>, %[[CUK:.*]]: tensor<?xi32>)
// CHECK: cf.assert %{{.*}}, "pisa.pyramid_build_varlen: cu_seqlens_k[0] is not 0"
// CHECK: cf.assert %{{.*}}, "pisa.pyramid_build_varlen: cu_seqlens_k[B] is not the number of key rows"
// CHECK: cf.assert %{{.*}}, "pisa.pyramid_build_varlen: cu_seqlens decrease"
//   Sequence b's pyramid at rows 2 floor(cu_k[b] / C) + 32 b.
// CHECK: scf.for %[[B:.*]] = {{.*}} iter_args
// CHECK: linalg.transpose
// CHECK: arith.divui %{{.*}}, %c16
// CHECK: arith.muli %[[B]], %c32
// CHECK: tensor.insert_slice
// CHECK: cf.assert %{{.*}}, "pisa.hier_topk_varlen: cu_seqlens_q and cu_seqlens_k give different B"
// CHECK: cf.assert %{{.*}}, "pisa.hier_topk_varlen: a sequence has more queries than keys (Nq_b > N_b)"
// CHECK: scf.for
// CHECK: linalg.transpose
// CHECK: tensor.insert_slice {{.*}} : tensor<?x2x8xi32> into tensor<?x2x8xi32>
// CHECK-NOT: pisa.
// CHECK: return
func.func @select(%q: tensor<?x8x64xf32>, %k: tensor<?x2x64xf32>, %cuq: tensor<?xi32>, %cuk: tensor<?xi32>) -> tensor<?x2x8xi32> {
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cuk) block_size = 16 branching = 2 : tensor<?x2x64xf32>, tensor<?xi32> -> tensor<?x2x64xf32>
  %s = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = 8 block_size = 16 branching = 2
      : tensor<?x8x64xf32>, tensor<?x2x64xf32>, tensor<?x2x64xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x2x8xi32>
  return %s : tensor<?x2x8xi32>
}
