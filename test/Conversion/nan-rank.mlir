// RUN: pisa-opt %s --convert-pisa-to-linalg | FileCheck %s --enable-var-scope --check-prefix=CPU
// RUN: pisa-opt %s --pisa-select-schedule --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu | FileCheck %s --enable-var-scope --check-prefix=GPU

// Every ranking compares scores with NaN taken as -inf (semantics section
// 3): a NaN from overflowing products would otherwise be kept beside K
// others, past the end of the arrays holding the kept nodes
// (test/Integration/CPU/overflow.test runs it).

// CPU-LABEL: func.func @select
// CPU: %[[ISNAN:.*]] = arith.cmpf uno, %[[MINE:.*]], %[[MINE]] : f32
// CPU-NEXT: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CPU-NEXT: %[[RANKED:.*]] = arith.select %[[ISNAN]], %[[NEGINF]], %[[MINE]] : f32
// CPU: %[[ISNAN2:.*]] = arith.cmpf uno, %[[THEIRS:.*]], %[[THEIRS]] : f32
// CPU-NEXT: %[[NEGINF2:.*]] = arith.constant 0xFF800000 : f32
// CPU-NEXT: %[[RANKED2:.*]] = arith.select %[[ISNAN2]], %[[NEGINF2]], %[[THEIRS]] : f32
// CPU-NEXT: arith.cmpf ogt, %[[RANKED2]], %[[RANKED]] : f32

// GPU-LABEL: gpu.func @select_stage1_walk
// GPU: %[[ISNAN:.*]] = arith.cmpf uno, %[[MINE:.*]], %[[MINE]] : f32
// GPU: %[[RANKED:.*]] = arith.select %[[ISNAN]], %{{.*}}, %[[MINE]] : f32
// GPU: arith.cmpf ogt, %{{.*}}, %[[RANKED]] : f32
// GPU-LABEL: gpu.func @select_final
// GPU: arith.cmpf uno
// GPU: arith.cmpf ogt
func.func @select(%q: tensor<1x16x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                  %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x4096x8xi32> {
  %sel = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x4096x8xi32>
  return %sel : tensor<1x1x4096x8xi32>
}
