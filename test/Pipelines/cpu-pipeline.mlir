// RUN: pisa-opt %s --pisa-cpu-pipeline | FileCheck %s --enable-var-scope

// Everything lowers to the LLVM dialect with a C-interface entry point.
// CHECK-NOT: pisa.
// CHECK-NOT: tensor.
// CHECK-NOT: scf.
// CHECK-NOT: memref.
// CHECK-LABEL: llvm.func @select
// CHECK: llvm.call @malloc
// CHECK: llvm.intr.exp
// CHECK: llvm.intr.log
// CHECK-LABEL: llvm.func @_mlir_ciface_select
func.func @select(%q: tensor<1x3x100x16xf16>, %k: tensor<1x1x100x16xf16>, %off: index)
    -> tensor<1x1x100x4xi32> attributes {llvm.emit_c_interface} {
  %p = pisa.pyramid_build %k block_size = 8 branching = 2
      : tensor<1x1x100x16xf16> -> tensor<1x1x27x16xf32>
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 8 branching = 2
      : tensor<1x3x100x16xf16>, tensor<1x1x100x16xf16>, tensor<1x1x27x16xf32>
      -> tensor<1x1x100x4xi32>
  return %s : tensor<1x1x100x4xi32>
}
