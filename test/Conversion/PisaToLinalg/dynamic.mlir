// RUN: pisa-opt %s --convert-pisa-to-linalg --split-input-file | FileCheck %s --enable-var-scope

// Dynamic B, N and pyramid rows: the layout comes from N at run time (a
// loop over at most 64 levels filling the level tables) and the means from
// scf loops; no static shape is assumed anywhere.

// CHECK-LABEL: func.func @dynamic_pyramid
// CHECK-SAME: (%[[K:.*]]: tensor<?x2x?x8xf32>)
// CHECK-DAG: %[[B:.*]] = tensor.dim %[[K]], %c0{{.*}}
// CHECK-DAG: %[[N:.*]] = tensor.dim %[[K]], %c2{{.*}}
// CHECK: %[[LEAVES:.*]] = arith.ceildivui %[[N]], %c8
// CHECK: %[[TABLES:.*]]:8 = scf.for %{{.*}} = %c1{{.*}} to %c65
// CHECK: tensor.empty(%[[B]], %[[TABLES]]#4) : tensor<?x2x?x8xf32>
// CHECK: scf.for {{.*}} to %[[B]]
// CHECK: arith.divf
// CHECK: tensor.insert
// CHECK-NOT: pisa.pyramid_build
func.func @dynamic_pyramid(%k: tensor<?x2x?x8xf32>) -> tensor<?x2x?x8xf32> {
  %p = pisa.pyramid_build %k block_size = 8 branching = 4
      : tensor<?x2x?x8xf32> -> tensor<?x2x?x8xf32>
  return %p : tensor<?x2x?x8xf32>
}

// -----

// CHECK-LABEL: func.func @dynamic_select
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<1x2x?x8xf32>, %[[K:[^:]*]]: tensor<1x1x?x8xf32>
// CHECK-DAG: %[[NQ:.*]] = tensor.dim %[[Q]], %c2{{.*}}
// CHECK-DAG: %[[N:.*]] = tensor.dim %[[K]], %c2{{.*}}
// CHECK: scf.for %{{.*}} = %c1{{.*}} to %c65
// CHECK: tensor.empty(%[[NQ]]) : tensor<1x1x?x3xi32>
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %[[NQ]]
// CHECK-NOT: pisa.hier_topk
func.func @dynamic_select(%q: tensor<1x2x?x8xf32>, %k: tensor<1x1x?x8xf32>,
                          %p: tensor<1x1x?x8xf32>, %off: index) -> tensor<1x1x?x3xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 3 block_size = 8 branching = 2
      : tensor<1x2x?x8xf32>, tensor<1x1x?x8xf32>, tensor<1x1x?x8xf32> -> tensor<1x1x?x3xi32>
  return %s : tensor<1x1x?x3xi32>
}
