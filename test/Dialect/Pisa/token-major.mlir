// RUN: pisa-opt %s | pisa-opt | FileCheck %s --enable-var-scope
// RUN: pisa-opt %s --mlir-print-op-generic | pisa-opt | FileCheck %s --enable-var-scope

// Token-major operands ([B, T, H, X], FlashAttention's layout) round-trip;
// the pyramid stays [B, Hkv, P, d]. 200 keys, C = 64: 7 rows.

// CHECK-LABEL: func.func @token_major
// CHECK: pisa.pyramid_build %{{.*}} block_size = 64 branching = 2 {token_major} : tensor<2x200x3x16xf16> -> tensor<2x3x7x16xf32>
// CHECK: pisa.hier_topk {{.*}} topk = 4 block_size = 64 branching = 2 {token_major} : tensor<2x10x6x16xf16>, tensor<2x200x3x16xf16>, tensor<2x3x7x16xf32> -> tensor<2x10x3x4xi32>
func.func @token_major(%q: tensor<2x10x6x16xf16>, %k: tensor<2x200x3x16xf16>, %off: index) -> tensor<2x10x3x4xi32> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 {token_major} : tensor<2x200x3x16xf16> -> tensor<2x3x7x16xf32>
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 64 branching = 2 {token_major}
      : tensor<2x10x6x16xf16>, tensor<2x200x3x16xf16>, tensor<2x3x7x16xf32> -> tensor<2x10x3x4xi32>
  return %s : tensor<2x10x3x4xi32>
}
