// RUN: pisa-opt %s --convert-pisa-to-linalg | FileCheck %s --enable-var-scope
// RUN: pisa-opt %s --pisa-cpu-pipeline -o /dev/null

// Packed sparse attention and its gradient: the rules on cu_seqlens
// checked first, then per sequence the batched ops on its rows (the
// sequence's queries at offset N_b - Nq_b), the result rows inserted back.

func.func @attend_varlen(%q: tensor<?x4x16xf16>, %k: tensor<?x2x16xf16>, %v: tensor<?x2x8xf16>,
                         %s: tensor<?x2x3xi32>, %cq: tensor<?xi32>, %ck: tensor<?xi32>,
                         %do: tensor<?x4x8xf16>)
    -> (tensor<?x4x8xf16>, tensor<?x4xf32>, tensor<?x4x16xf32>, tensor<?x2x16xf32>, tensor<?x2x8xf32>) {
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) block_size = 16
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x8xf16>, tensor<?x2x3xi32>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x4x8xf16>, tensor<?x4xf32>
  %dq, %dk, %dv = pisa.sparse_attention_grad_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck)
      out(%o, %l) grad(%do) block_size = 16
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x8xf16>, tensor<?x2x3xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<?x4x8xf16>, tensor<?x4xf32>, tensor<?x4x8xf16>
      -> tensor<?x4x16xf32>, tensor<?x2x16xf32>, tensor<?x2x8xf32>
  return %o, %l, %dq, %dk, %dv : tensor<?x4x8xf16>, tensor<?x4xf32>, tensor<?x4x16xf32>, tensor<?x2x16xf32>, tensor<?x2x8xf32>
}
// CHECK-LABEL: func.func @attend_varlen
// CHECK: cf.assert {{.*}} "pisa.sparse_attention_varlen: cu_seqlens_k[0] is not 0"
// CHECK: cf.assert {{.*}} "pisa.sparse_attention_varlen: a sequence has more queries than keys (Nq_b > N_b)"
// CHECK: scf.for
// CHECK: tensor.extract_slice
// CHECK: scf.for
// CHECK: math.exp
// CHECK: tensor.insert_slice {{.*}} into tensor<?x4x8xf16>
// CHECK: tensor.insert_slice {{.*}} into tensor<?x4xf32>
// CHECK: cf.assert {{.*}} "pisa.sparse_attention_grad_varlen: cu_seqlens_k[0] is not 0"
// CHECK: scf.for
// CHECK: tensor.insert_slice {{.*}} into tensor<?x4x16xf32>
// CHECK: tensor.insert_slice {{.*}} into tensor<?x2x16xf32>
// CHECK: tensor.insert_slice {{.*}} into tensor<?x2x8xf32>
// CHECK-NOT: pisa.
