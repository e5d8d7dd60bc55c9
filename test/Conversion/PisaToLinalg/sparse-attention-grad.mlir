// RUN: pisa-opt %s --convert-pisa-to-linalg | FileCheck %s --enable-var-scope
// RUN: pisa-opt %s --pisa-cpu-pipeline -o /dev/null

// The backward as loops over (batch, query head, query) and the keys each
// query attends; dq, dk and dv accumulate in f32 from zero, then round
// once to f16 when the result says so. Nothing is N x N.

func.func @attend_grad(%q: tensor<1x4x?x16xf16>, %k: tensor<1x2x?x16xf16>,
                       %v: tensor<1x2x?x8xf16>, %s: tensor<1x2x?x3xi32>,
                       %o: tensor<1x4x?x8xf16>, %l: tensor<1x4x?xf32>,
                       %do: tensor<1x4x?x8xf16>, %off: index)
    -> (tensor<1x4x?x16xf32>, tensor<1x2x?x16xf16>, tensor<1x2x?x8xf32>) {
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off
      out(%o, %l) grad(%do) block_size = 16
      : tensor<1x4x?x16xf16>, tensor<1x2x?x16xf16>, tensor<1x2x?x8xf16>,
        tensor<1x2x?x3xi32>, tensor<1x4x?x8xf16>, tensor<1x4x?xf32>,
        tensor<1x4x?x8xf16>
      -> tensor<1x4x?x16xf32>, tensor<1x2x?x16xf16>, tensor<1x2x?x8xf32>
  return %dq, %dk, %dv : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf16>, tensor<1x2x?x8xf32>
}
// CHECK-LABEL: func.func @attend_grad
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<1x4x?x16xf16>, %[[K:[^:]*]]: tensor<1x2x?x16xf16>, %[[V:[^:]*]]: tensor<1x2x?x8xf16>, %[[S:[^:]*]]: tensor<1x2x?x3xi32>, %[[O:[^:]*]]: tensor<1x4x?x8xf16>, %[[L:[^:]*]]: tensor<1x4x?xf32>, %[[DO:[^:]*]]: tensor<1x4x?x8xf16>
// CHECK-DAG: %[[N:.*]] = tensor.dim %[[K]], %c2
// CHECK-DAG: %[[BLOCKS:.*]] = arith.ceildivui %[[N]], %c16
// CHECK-DAG: linalg.fill {{.*}} -> tensor<1x4x?x16xf32>
// CHECK-DAG: linalg.fill {{.*}} -> tensor<1x2x?x16xf32>
// CHECK-DAG: linalg.fill {{.*}} -> tensor<1x2x?x8xf32>
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
// CHECK: tensor.extract %[[L]]
// CHECK: tensor.extract %[[S]]
// CHECK: arith.cmpi ult, %{{.*}}, %[[BLOCKS]]
// CHECK: scf.if
// CHECK: arith.cmpf oeq
// CHECK: math.exp
// CHECK: linalg.generic
// CHECK: arith.truncf {{.*}} : f32 to f16
// CHECK-NOT: pisa.sparse_attention_grad
// CHECK-NOT: tensor<{{.*}}x?x?x


// Token-major: the same op head-major between transposes.
func.func @attend_grad_token_major(%q: tensor<1x?x4x16xf32>, %k: tensor<1x?x2x16xf32>,
                                   %v: tensor<1x?x2x8xf32>, %s: tensor<1x?x2x3xi32>,
                                   %o: tensor<1x?x4x8xf32>, %l: tensor<1x?x4xf32>,
                                   %do: tensor<1x?x4x8xf32>, %off: index)
    -> (tensor<1x?x4x16xf32>, tensor<1x?x2x16xf32>, tensor<1x?x2x8xf32>) {
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off
      out(%o, %l) grad(%do) block_size = 16 {token_major}
      : tensor<1x?x4x16xf32>, tensor<1x?x2x16xf32>, tensor<1x?x2x8xf32>,
        tensor<1x?x2x3xi32>, tensor<1x?x4x8xf32>, tensor<1x?x4xf32>,
        tensor<1x?x4x8xf32>
      -> tensor<1x?x4x16xf32>, tensor<1x?x2x16xf32>, tensor<1x?x2x8xf32>
  return %dq, %dk, %dv : tensor<1x?x4x16xf32>, tensor<1x?x2x16xf32>, tensor<1x?x2x8xf32>
}
// CHECK-LABEL: func.func @attend_grad_token_major
// CHECK-COUNT-7: linalg.transpose
// CHECK: scf.for
// CHECK-COUNT-3: linalg.transpose
// CHECK-NOT: pisa.sparse_attention_grad
