// RUN: pisa-opt %s --convert-pisa-to-linalg | FileCheck %s --enable-var-scope

// 200 keys, C = 64, g = 2: 4 leaves (the last one partial, padded 200 -> 256),
// then 2 nodes, then the root; each level is pad/expand + linalg.reduce over
// the group + a mean by the real child count, inserted at its packed rows.

// CHECK-LABEL: func.func @pyramid
// CHECK-SAME: (%[[K:.*]]: tensor<1x2x200x16xf16>)
// CHECK: %[[PACKED:.*]] = tensor.empty() : tensor<1x2x7x16xf32>
// CHECK: %[[PAD:.*]] = tensor.pad %[[K]] low[0, 0, 0, 0] high[0, 0, 56, 0]
// CHECK: %[[G1:.*]] = tensor.expand_shape %[[PAD]] {{\[\[}}0], [1], [2, 3], [4]] output_shape [1, 2, 4, 64, 16]
// CHECK: %[[S1:.*]] = linalg.reduce ins(%[[G1]] : tensor<1x2x4x64x16xf16>) outs(%{{.*}} : tensor<1x2x4x16xf32>) dimensions = [3]
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: %[[L1:.*]] = linalg.generic {{.*}} outs(%[[S1]] : tensor<1x2x4x16xf32>)
// CHECK: linalg.index 2
// CHECK: arith.minsi %{{.*}}, %c64
// CHECK: arith.divf
// CHECK: %[[P1:.*]] = tensor.insert_slice %[[L1]] into %[[PACKED]][0, 0, 0, 0] [1, 2, 4, 16]
// CHECK-NOT: tensor.pad
// CHECK: tensor.expand_shape %[[L1]] {{.*}} into tensor<1x2x2x2x16xf32>
// CHECK: %[[L2:.*]] = linalg.generic
// CHECK: %[[P2:.*]] = tensor.insert_slice %[[L2]] into %[[P1]][0, 0, 4, 0] [1, 2, 2, 16]
// CHECK: tensor.expand_shape %[[L2]] {{.*}} into tensor<1x2x1x2x16xf32>
// CHECK: %[[L3:.*]] = linalg.generic
// CHECK: %[[P3:.*]] = tensor.insert_slice %[[L3]] into %[[P2]][0, 0, 6, 0] [1, 2, 1, 16]
// CHECK: return %[[P3]]
func.func @pyramid(%k: tensor<1x2x200x16xf16>) -> tensor<1x2x7x16xf32> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2
      : tensor<1x2x200x16xf16> -> tensor<1x2x7x16xf32>
  return %p : tensor<1x2x7x16xf32>
}

// Three leaves and g = 4: the root averages 3 children (padded to 4).
// CHECK-LABEL: func.func @partial_root
// CHECK: tensor.pad %{{.*}} high[0, 0, 1, 0]
// CHECK: into tensor<1x1x1x4x8xf32>
// CHECK: arith.minsi %{{.*}}, %c4
// CHECK-NOT: pisa.
func.func @partial_root(%k: tensor<1x1x24x8xf32>) -> tensor<1x1x4x8xf32> {
  %p = pisa.pyramid_build %k block_size = 8 branching = 4
      : tensor<1x1x24x8xf32> -> tensor<1x1x4x8xf32>
  return %p : tensor<1x1x4x8xf32>
}

