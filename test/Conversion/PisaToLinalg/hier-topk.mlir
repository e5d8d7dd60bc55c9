// RUN: pisa-opt %s --convert-pisa-to-linalg | FileCheck %s --enable-var-scope

// The paper's setting: N = 4096 queries and keys, C = 64 (64 leaves),
// g = 2, K = 8, G = 16, d = 128. Selection becomes scf loops over
// (batch, KV head, query) that carry bounded per-query state: g*K = 16
// candidates, K = 8 kept, 16 scores. A level loop walks L..2 (7 levels),
// then the leaves are scored from the raw keys. No tensor is Nq x M.

// CHECK-LABEL: func.func @select
// CHECK-SAME: (%[[Q:.*]]: tensor<1x16x4096x128xbf16>, %[[K:.*]]: tensor<1x1x4096x128xbf16>, %[[P:.*]]: tensor<1x1x127x128xf32>, %[[OFF:.*]]: index)
// Level tables (entry l for level l, zeros past the root at level 7):
// CHECK-DAG: %[[SPANS:.*]] = arith.constant dense<[0, 1, 2, 4, 8, 16, 32, 64, 0, {{.*}}]> : tensor<65xindex>
// CHECK-DAG: %[[SIZES:.*]] = arith.constant dense<[0, 64, 32, 16, 8, 4, 2, 1, 0, {{.*}}]> : tensor<65xindex>
// CHECK-DAG: %[[OFFSETS:.*]] = arith.constant dense<[0, 0, 64, 96, 112, 120, 124, 126, 0, {{.*}}]> : tensor<65xindex>
// CHECK-DAG: %[[OUT:.*]] = tensor.empty() : tensor<1x1x4096x8xi32>
// CHECK-DAG: %[[CAND:.*]] = tensor.empty() : tensor<16xi32>
// CHECK-DAG: %[[KEPT:.*]] = tensor.empty() : tensor<8xi32>
// CHECK-DAG: %[[SCORES:.*]] = tensor.empty() : tensor<16xf32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[OUT]], %{{.*}} = %[[CAND]], %{{.*}} = %[[KEPT]], %{{.*}} = %[[SCORES]])
// CHECK: scf.for
// CHECK: %[[QUERIES:.*]]:4 = scf.for %[[I:.*]] = %{{.*}} to %c4096
// CHECK: %[[T:.*]] = arith.addi %[[OFF]], %[[I]] : index
//   Levels L .. 2 over the pyramid's summaries:
// CHECK: scf.for {{.*}} -> (tensor<16xi32>, index, tensor<8xi32>, tensor<16xf32>)
// CHECK: tensor.extract %[[SPANS]]
// CHECK: scf.if {{.*}} -> (tensor<16xf32>)
// CHECK: tensor.extract %[[P]]
// CHECK: math.exp
// CHECK: math.log
//   The leaves, scored from the raw keys:
// CHECK: tensor.extract %[[K]]
// CHECK: arith.extf {{.*}} : bf16 to f32
// CHECK: math.exp
// CHECK: tensor.insert {{.*}} : tensor<1x1x4096x8xi32>
// CHECK-NOT: pisa.hier_topk
// CHECK-NOT: tensor<1x1x4096x64x
// CHECK-NOT: tensor<4096x64x
// CHECK-NOT: tensor<1x16x4096x64x
func.func @select(%q: tensor<1x16x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                  %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x4096x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}
