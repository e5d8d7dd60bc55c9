// Malformed pisa syntax is a diagnostic and a non-zero exit, never a crash.
// RUN: split-file %s %t
// RUN: not pisa-opt %t/missing-attr.mlir 2>&1 | FileCheck %s --enable-var-scope --check-prefix=ATTR
// RUN: not pisa-opt %t/wrong-arity.mlir 2>&1 | FileCheck %s --enable-var-scope --check-prefix=ARITY
// RUN: not pisa-opt %t/rank.mlir 2>&1 | FileCheck %s --enable-var-scope --check-prefix=RANK
// RUN: not pisa-opt %t/bad-number.mlir 2>&1 | FileCheck %s --enable-var-scope --check-prefix=NUMBER

// ATTR: error: custom op 'pisa.pyramid_build' expected 'branching'
// ARITY: error: expected ','
// RANK: error: 'pisa.pyramid_build' op operand #0 must be 4D tensor
// NUMBER: error: expected attribute value

//--- missing-attr.mlir
func.func @f(%k: tensor<1x1x8x4xf32>) {
  %p = pisa.pyramid_build %k block_size = 4 : tensor<1x1x8x4xf32> -> tensor<1x1x3x4xf32>
  return
}
//--- wrong-arity.mlir
func.func @f(%q: tensor<1x1x8x4xf32>, %k: tensor<1x1x8x4xf32>) {
  %s = pisa.hier_topk %q topk = 3 block_size = 4 branching = 2 : tensor<1x1x8x4xf32> -> tensor<1x1x8x3xi32>
  return
}
//--- rank.mlir
func.func @f(%k: tensor<8x4xf32>) {
  %p = pisa.pyramid_build %k block_size = 4 branching = 2 : tensor<8x4xf32> -> tensor<1x1x3x4xf32>
  return
}
//--- bad-number.mlir
func.func @f(%k: tensor<1x1x8x4xf32>) {
  %p = pisa.pyramid_build %k block_size = four branching = 2 : tensor<1x1x8x4xf32> -> tensor<1x1x3x4xf32>
  return
}
