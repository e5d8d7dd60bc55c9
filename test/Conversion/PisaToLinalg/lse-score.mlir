// RUN: pisa-opt %s --convert-pisa-to-linalg | FileCheck %s --enable-var-scope

// lse_score: a loop nest over (batch, KV head, query, candidate); -1 scores
// -inf without touching the children; the online LSE runs over the valid
// children only (the loop bound is their count).

// CHECK-LABEL: func.func @score
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x16x32xf32>, %[[C:.*]]: tensor<1x2x9x32xf32>, %[[N:.*]]: tensor<1x2x16x4xi32>, %[[OFF:.*]]: index)
// CHECK-DAG: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
// CHECK: %[[NODE:.*]] = tensor.extract %[[N]]
// CHECK: %[[VALID:.*]] = arith.cmpi sge, %[[NODE]], %{{.*}} : i32
// CHECK: scf.if %[[VALID]] -> (f32)
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: tensor.extract %[[C]]
// CHECK: arith.mulf {{.*}} fastmath<reassoc,contract> : f32
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: math.log
// CHECK: } else {
// CHECK: scf.yield %[[NEGINF]] : f32
// CHECK-NOT: pisa.lse_score
func.func @score(%q: tensor<1x4x16x32xf32>, %c: tensor<1x2x9x32xf32>,
                 %n: tensor<1x2x16x4xi32>, %off: index) -> tensor<1x2x16x4xf32> {
  %u = pisa.lse_score %q, %c, %n, %off level = 2 block_size = 8 branching = 3
      : tensor<1x4x16x32xf32>, tensor<1x2x9x32xf32>, tensor<1x2x16x4xi32>
      -> tensor<1x2x16x4xf32>
  return %u : tensor<1x2x16x4xf32>
}
