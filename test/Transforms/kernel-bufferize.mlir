// RUN: pisa-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | FileCheck %s --enable-var-scope

// Kernel-level ops bufferize through the upstream interfaces
// (destination-passing): each destination is written in place into the
// buffer of its result. A kernel never reads its destination, so a
// destination that may not be written gets a fresh buffer and no copy.

// CHECK-LABEL: func.func @in_place
// CHECK-SAME: (%[[K:.*]]: memref<1x2x200x16xf16>, %[[Q:.*]]: memref<1x4x1x16xf16>, %[[OFF:.*]]: index, %[[OUT:.*]]: memref<1x2x1x4xi32>)
// CHECK: %[[P:.*]] = memref.alloc() {{.*}} : memref<1x2x7x16xf32>
// CHECK: pisa.kernel.pyramid %[[K]] outs(%[[P]]) {{.*}} : memref<1x2x200x16xf16>, memref<1x2x7x16xf32>{{$}}
// CHECK-NOT: memref.alloc
// CHECK: pisa.kernel.select_single_stage %[[Q]], %[[K]], %[[P]], %[[OFF]] outs(%[[OUT]])
// CHECK: return %[[OUT]]
func.func @in_place(%k: tensor<1x2x200x16xf16>, %q: tensor<1x4x1x16xf16>, %off: index, %out: tensor<1x2x1x4xi32>) -> tensor<1x2x1x4xi32> {
  %e = tensor.empty() : tensor<1x2x7x16xf32>
  %p = pisa.kernel.pyramid %k outs(%e) block_size = 64 branching = 2 : tensor<1x2x200x16xf16>, tensor<1x2x7x16xf32> -> tensor<1x2x7x16xf32>
  %s = pisa.kernel.select_single_stage %q, %k, %p, %off outs(%out) topk = 4 block_size = 64 branching = 2 scale = 0.25
      : tensor<1x4x1x16xf16>, tensor<1x2x200x16xf16>, tensor<1x2x7x16xf32>, tensor<1x2x1x4xi32> -> tensor<1x2x1x4xi32>
  return %s : tensor<1x2x1x4xi32>
}

// CHECK-LABEL: func.func @read_only_destination
// CHECK-SAME: %[[OLD:[a-z0-9]+]]: memref<1x2x1x4xi32>)
// CHECK: %[[S:.*]] = memref.alloc() {{.*}} : memref<1x2x1x4xi32>
// CHECK-NOT: memref.copy
// CHECK: pisa.kernel.select_single_stage {{.*}} outs(%[[S]])
// CHECK: return %[[S]]
func.func @read_only_destination(%k: tensor<1x2x200x16xf16>, %q: tensor<1x4x1x16xf16>, %p: tensor<1x2x7x16xf32>, %off: index,
                                 %old: tensor<1x2x1x4xi32> {bufferization.writable = false}) -> tensor<1x2x1x4xi32> {
  %s = pisa.kernel.select_single_stage %q, %k, %p, %off outs(%old) topk = 4 block_size = 64 branching = 2 scale = 0.25
      : tensor<1x4x1x16xf16>, tensor<1x2x200x16xf16>, tensor<1x2x7x16xf32>, tensor<1x2x1x4xi32> -> tensor<1x2x1x4xi32>
  return %s : tensor<1x2x1x4xi32>
}
