// RUN: pisa-opt %s --convert-pisa-to-linalg | FileCheck %s --enable-var-scope

// The CPU reference of sparse_attention: loops over (batch, query head,
// query), then over the selection row (entries used in order: >= 0, below
// the block count, above the last used), then over the block's causal keys
// with an online softmax (running max, running sum, a [dv] accumulator).
// Nothing has an N-sized dimension besides the inputs.

// CHECK-LABEL: func.func @attend
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<1x4x?x16xf16>, %[[K:[^:]*]]: tensor<1x2x?x16xf16>, %[[V:[^:]*]]: tensor<1x2x?x8xf16>, %[[S:[^:]*]]: tensor<1x2x?x3xi32>
// CHECK-DAG: %[[N:.*]] = tensor.dim %[[K]], %c2
// CHECK-DAG: %[[BLOCKS:.*]] = arith.ceildivui %[[N]], %c16
// CHECK-DAG: tensor.empty() : tensor<8xf32>
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
// CHECK: tensor.extract %[[S]]
// CHECK: arith.cmpi ult, %{{.*}}, %[[BLOCKS]]
// CHECK: arith.cmpi sgt
// CHECK: scf.if
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: math.exp
// CHECK: math.log
// CHECK: arith.truncf {{.*}} : f32 to f16
// CHECK-NOT: pisa.sparse_attention
// CHECK-NOT: tensor<{{.*}}x?x?x
func.func @attend(%q: tensor<1x4x?x16xf16>, %k: tensor<1x2x?x16xf16>, %v: tensor<1x2x?x8xf16>,
                  %s: tensor<1x2x?x3xi32>, %off: index) -> (tensor<1x4x?x8xf16>, tensor<1x4x?xf32>) {
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 16
      : tensor<1x4x?x16xf16>, tensor<1x2x?x16xf16>, tensor<1x2x?x8xf16>, tensor<1x2x?x3xi32>
      -> tensor<1x4x?x8xf16>, tensor<1x4x?xf32>
  return %o, %l : tensor<1x4x?x8xf16>, tensor<1x4x?xf32>
}
