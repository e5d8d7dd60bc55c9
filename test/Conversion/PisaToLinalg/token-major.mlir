// RUN: pisa-opt %s --convert-pisa-to-linalg | FileCheck %s --enable-var-scope

// The CPU reference takes token-major operands by transposing them
// head-major, running the same lowering, and transposing the selection
// back (test/Integration/CPU/select.test runs it against NumPy).

// CHECK-LABEL: func.func @select
// CHECK: linalg.transpose ins(%{{.*}} : tensor<1x200x2x16xf32>) outs(%{{.*}} : tensor<1x2x200x16xf32>) permutation = [0, 2, 1, 3]
// CHECK: linalg.transpose ins(%{{.*}} : tensor<1x10x4x16xf32>) outs(%{{.*}} : tensor<1x4x10x16xf32>) permutation = [0, 2, 1, 3]
// CHECK: linalg.transpose ins(%{{.*}} : tensor<1x2x10x4xi32>) outs(%{{.*}} : tensor<1x10x2x4xi32>) permutation = [0, 2, 1, 3]
// CHECK-NOT: pisa.
// CHECK: return %{{.*}} : tensor<1x10x2x4xi32>
func.func @select(%q: tensor<1x10x4x16xf32>, %k: tensor<1x200x2x16xf32>) -> tensor<1x10x2x4xi32> {
  %off = arith.constant 190 : index
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 {token_major} : tensor<1x200x2x16xf32> -> tensor<1x2x7x16xf32>
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 64 branching = 2 {token_major}
      : tensor<1x10x4x16xf32>, tensor<1x200x2x16xf32>, tensor<1x2x7x16xf32> -> tensor<1x10x2x4xi32>
  return %s : tensor<1x10x2x4xi32>
}

// Token-major sparse attention: q, k, v and the selection transposed
// head-major, the same loops, then the output [B, Nq, Hq, dv] and lse
// [B, Nq, Hq] transposed back.
// CHECK-LABEL: func.func @attend
// CHECK-DAG: linalg.transpose ins(%{{.*}} : tensor<1x10x4x16xf32>) outs(%{{.*}} : tensor<1x4x10x16xf32>) permutation = [0, 2, 1, 3]
// CHECK-DAG: linalg.transpose ins(%{{.*}} : tensor<1x200x2x16xf32>) outs(%{{.*}} : tensor<1x2x200x16xf32>) permutation = [0, 2, 1, 3]
// CHECK-DAG: linalg.transpose ins(%{{.*}} : tensor<1x200x2x8xf32>) outs(%{{.*}} : tensor<1x2x200x8xf32>) permutation = [0, 2, 1, 3]
// CHECK-DAG: linalg.transpose ins(%{{.*}} : tensor<1x10x2x4xi32>) outs(%{{.*}} : tensor<1x2x10x4xi32>) permutation = [0, 2, 1, 3]
// CHECK-DAG: linalg.transpose ins(%{{.*}} : tensor<1x4x10x8xf32>) outs(%{{.*}} : tensor<1x10x4x8xf32>) permutation = [0, 2, 1, 3]
// CHECK-DAG: linalg.transpose ins(%{{.*}} : tensor<1x4x10xf32>) outs(%{{.*}} : tensor<1x10x4xf32>) permutation = [0, 2, 1]
// CHECK-NOT: pisa.
// CHECK: return %{{.*}}, %{{.*}} : tensor<1x10x4x8xf32>, tensor<1x10x4xf32>
func.func @attend(%q: tensor<1x10x4x16xf32>, %k: tensor<1x200x2x16xf32>, %v: tensor<1x200x2x8xf32>,
                  %s: tensor<1x10x2x4xi32>) -> (tensor<1x10x4x8xf32>, tensor<1x10x4xf32>) {
  %off = arith.constant 190 : index
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 64 {token_major}
      : tensor<1x10x4x16xf32>, tensor<1x200x2x16xf32>, tensor<1x200x2x8xf32>, tensor<1x10x2x4xi32>
      -> tensor<1x10x4x8xf32>, tensor<1x10x4xf32>
  return %o, %l : tensor<1x10x4x8xf32>, tensor<1x10x4xf32>
}
