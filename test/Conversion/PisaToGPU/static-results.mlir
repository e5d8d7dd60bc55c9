// RUN: pisa-opt %s --pisa-select-schedule --pisa-decompose-to-kernels --canonicalize | FileCheck %s --enable-var-scope

// A static result over operands whose sizes are dynamic: the kernels size
// their grids and writes from the operands, so each static extent the
// operands give only at run time is a host assertion (a call's error in an
// AOT library), never a write past the result's end.

// CHECK-LABEL: func.func @attend
// CHECK: cf.assert %{{.*}}, "pisa.sparse_attention: the output's dim 0 (1) is not the size the operands give"
// CHECK: cf.assert %{{.*}}, "pisa.sparse_attention: the output's dim 2 (5) is not the size the operands give"
// CHECK: cf.assert %{{.*}}, "pisa.sparse_attention: the lse's dim 0 (1) is not the size the operands give"
// CHECK: cf.assert %{{.*}}, "pisa.sparse_attention: the lse's dim 2 (5) is not the size the operands give"
// CHECK: pisa.kernel.sparse_attention
func.func @attend(%q: tensor<?x4x?x64xbf16>, %k: tensor<?x1x?x64xbf16>, %v: tensor<?x1x?x64xbf16>, %s: tensor<?x1x?x8xi32>, %off: index) -> tensor<1x4x5x64xbf16> {
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 64
      : tensor<?x4x?x64xbf16>, tensor<?x1x?x64xbf16>, tensor<?x1x?x64xbf16>, tensor<?x1x?x8xi32> -> tensor<1x4x5x64xbf16>, tensor<1x4x5xf32>
  return %o : tensor<1x4x5x64xbf16>
}

// CHECK-LABEL: func.func @select
// CHECK: cf.assert %{{.*}}, "pisa.pyramid_build: the result's dim 0 (1) is not the size the operands give"
// CHECK: cf.assert %{{.*}}, "pisa.hier_topk: the result's dim 0 (1) is not the size the operands give"
// CHECK: cf.assert %{{.*}}, "pisa.hier_topk: the result's dim 2 (5) is not the size the operands give"
func.func @select(%q: tensor<?x4x?x64xbf16>, %k: tensor<?x1x?x64xbf16>, %off: index) -> tensor<1x1x5x8xi32> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 : tensor<?x1x?x64xbf16> -> tensor<1x1x?x64xf32>
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<?x4x?x64xbf16>, tensor<?x1x?x64xbf16>, tensor<1x1x?x64xf32> -> tensor<1x1x5x8xi32>
  return %s : tensor<1x1x5x8xi32>
}

// Static operands: nothing to check at run time.
// CHECK-LABEL: func.func @all_static
// CHECK-NOT: is not the size the operands give
// CHECK: return
func.func @all_static(%q: tensor<1x4x5x64xbf16>, %k: tensor<1x1x100x64xbf16>, %off: index) -> tensor<1x1x5x8xi32> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 : tensor<1x1x100x64xbf16> -> tensor<1x1x3x64xf32>
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<1x4x5x64xbf16>, tensor<1x1x100x64xbf16>, tensor<1x1x3x64xf32> -> tensor<1x1x5x8xi32>
  return %s : tensor<1x1x5x8xi32>
}
