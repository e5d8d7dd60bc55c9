// RUN: pisa-opt %s --pisa-decompose-to-kernels --canonicalize --cse | FileCheck %s --enable-var-scope

// The first step of the GPU lowering on its own: each op becomes the
// kernel-level ops of its schedule, destination-passing on tensors, with a
// tensor.empty destination for every intermediate and the run-time rules
// on dynamic sizes as host assertions before any kernel.

// Two-stage, bf16, every size dynamic: pyramid, fragment planes (the walk
// scores on tensor cores), walk, bucket, score tiles, final selection.
// CHECK-LABEL: func.func @two_stage
// CHECK-SAME: (%[[Q:.*]]: tensor<?x16x?x128xbf16>, %[[K:.*]]: tensor<?x1x?x128xbf16>, %[[OFF:.*]]: index)
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[N:.*]] = tensor.dim %[[K]], %[[C2]]
// CHECK: %[[LAYOUT:.*]]:3 = scf.while
// CHECK: %[[B:.*]] = tensor.dim %[[K]], %[[C0]]
// CHECK: %[[PINIT:.*]] = tensor.empty(%[[B]], %[[LAYOUT]]#2) : tensor<?x1x?x128xf32>
// CHECK: %[[PYR:.*]] = pisa.kernel.pyramid %[[K]] outs(%[[PINIT]]) block_size = 64 branching = 2
// CHECK: %[[NQ:.*]] = tensor.dim %[[Q]], %[[C2]]
// CHECK: cf.assert %{{.*}}, "pisa.hier_topk: the keys' batch differs from the queries'"
// CHECK: cf.assert %{{.*}}, "pisa.hier_topk: query_offset + Nq exceeds N"
// CHECK: cf.assert %{{.*}}, "pisa.hier_topk: N is above the GPU limit of 2147483647 (32-bit leaf indices)"
// CHECK: %[[SINIT:.*]] = tensor.empty(%{{.*}}, %[[NQ]]) : tensor<?x1x?x8xi32>
// CHECK: %[[PLINIT:.*]] = tensor.empty(%{{.*}}, %[[LAYOUT]]#2) : tensor<?x1x?x256xbf16>
// CHECK: %[[PLANES:.*]] = pisa.kernel.fragment_planes %[[PYR]] outs(%[[PLINIT]])
// CHECK: %[[WALK:.*]]:2 = pisa.kernel.walk %[[Q]], %[[PLANES]], %[[OFF]], %[[N]] outs(%{{.*}}, %{{.*}}) topk = 8 block_size = 64 branching = 2 scale = 0.0883883461 {tensor_cores}
// CHECK-SAME: -> tensor<?x1x?x16xi32>, tensor<?x1x?xi32>
// CHECK: %[[SORT:.*]]:8 = pisa.kernel.bucket %[[OFF]], %[[WALK]]#0, %[[WALK]]#1 outs({{.*}}) topk = 8 block_size = 64 q_tile = 4
// CHECK: %[[SCORES:.*]] = pisa.kernel.score_tiles %[[Q]], %[[K]], %[[OFF]], %[[SORT]]#0, %[[SORT]]#1, %[[SORT]]#3, %[[SORT]]#4, %[[SORT]]#5, %[[SORT]]#6 outs(%{{.*}}) topk = 8 block_size = 64 q_tile = 4 scale = 0.0883883461
// CHECK: %[[SEL:.*]] = pisa.kernel.select_final %[[OFF]], %[[N]], %[[WALK]]#0, %[[WALK]]#1, %[[SCORES]] outs(%[[SINIT]]) topk = 8 block_size = 64
// CHECK-NOT: pisa.hier_topk
// CHECK-NOT: pisa.pyramid_build
// CHECK: return %[[SEL]]
func.func @two_stage(%q: tensor<?x16x?x128xbf16>, %k: tensor<?x1x?x128xbf16>, %off: index) -> tensor<?x1x?x8xi32> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 : tensor<?x1x?x128xbf16> -> tensor<?x1x?x128xf32>
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 0, io_single_stage = 0>}
      : tensor<?x16x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x128xf32> -> tensor<?x1x?x8xi32>
  return %s : tensor<?x1x?x8xi32>
}

// f32 queries: the walk scores the f32 pyramid rows (no planes); static
// sizes give static destinations and no assertions. 1000 keys, C = 64:
// 16 leaves, 31 rows; 4000 pairs in tiles of 2: up to 2016 tiles.
// CHECK-LABEL: func.func @two_stage_f32
// CHECK-NOT: cf.assert
// CHECK-NOT: pisa.kernel.fragment_planes
// CHECK: pisa.kernel.walk %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}, %{{.*}}) topk = 4 block_size = 64 branching = 2 scale = 2.500000e-01 :
// CHECK-SAME: tensor<2x6x1000x16xf32>, tensor<2x3x31x16xf32>, tensor<2x3x1000x8xi32>, tensor<2x3x1000xi32>
// CHECK: pisa.kernel.bucket {{.*}} q_tile = 2 : tensor<2x3x1000x8xi32>, tensor<2x3x1000xi32>, tensor<2x3x16xi32>, tensor<2x3x16xi32>, tensor<2x3x16xi32>, tensor<2x3x4016xi32>, tensor<2x3x4016xi32>, tensor<2x3xi32>, tensor<2x3x8000xi32>, tensor<2x3x16xi32>
// CHECK: pisa.kernel.score_tiles
// CHECK: pisa.kernel.select_final
func.func @two_stage_f32(%q: tensor<2x6x1000x16xf32>, %k: tensor<2x3x1000x16xf32>, %p: tensor<2x3x31x16xf32>) -> tensor<2x3x1000x4xi32> {
  %off = arith.constant 0 : index
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 2, io_two_stage = 0, io_single_stage = 0>}
      : tensor<2x6x1000x16xf32>, tensor<2x3x1000x16xf32>, tensor<2x3x31x16xf32> -> tensor<2x3x1000x4xi32>
  return %s : tensor<2x3x1000x4xi32>
}

// Single stage: one kernel op; the given scale is kept, a passed-in
// pyramid is checked against the keys only when a size is dynamic.
// CHECK-LABEL: func.func @single_stage
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x1x32xf32>, %[[K:.*]]: tensor<2x2x100x32xf32>, %[[P:.*]]: tensor<2x2x14x32xf32>, %[[OFF:.*]]: index)
// CHECK-NOT: cf.assert
// CHECK: %[[INIT:.*]] = tensor.empty() : tensor<2x2x1x4xi32>
// CHECK: %[[SEL:.*]] = pisa.kernel.select_single_stage %[[Q]], %[[K]], %[[P]], %[[OFF]] outs(%[[INIT]]) topk = 4 block_size = 16 branching = 2 scale = 5.000000e-01
// CHECK: return %[[SEL]]
func.func @single_stage(%q: tensor<2x4x1x32xf32>, %k: tensor<2x2x100x32xf32>, %p: tensor<2x2x14x32xf32>, %off: index) -> tensor<2x2x1x4xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 16 branching = 2 scale = 0.5
      {schedule = #pisa.schedule<single_stage, q_tile = 1, io_two_stage = 0, io_single_stage = 0>}
      : tensor<2x4x1x32xf32>, tensor<2x2x100x32xf32>, tensor<2x2x14x32xf32> -> tensor<2x2x1x4xi32>
  return %s : tensor<2x2x1x4xi32>
}

// A static row count with a dynamic N: the pyramid's rule at run time.
// CHECK-LABEL: func.func @pyramid_rows
// CHECK: cf.assert %{{.*}}, "pisa.pyramid_build: the pyramid's 7 rows are not the layout of the keys' N"
// CHECK: pisa.kernel.pyramid
func.func @pyramid_rows(%k: tensor<1x2x?x16xf16>) -> tensor<1x2x7x16xf32> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 : tensor<1x2x?x16xf16> -> tensor<1x2x7x16xf32>
  return %p : tensor<1x2x7x16xf32>
}

// Token-major: sizes read from dims 1 (tokens) and 2 (heads); the kernel
// ops that touch queries, keys or the selection carry token_major, and the
// selection's destination is [B, Nq, Hkv, K].
// CHECK-LABEL: func.func @token_major
// CHECK: pisa.kernel.select_single_stage {{.*}} {token_major} : tensor<2x1x4x32xf32>, tensor<2x100x2x32xf32>, tensor<2x2x14x32xf32>, tensor<2x1x2x4xi32> -> tensor<2x1x2x4xi32>
func.func @token_major(%q: tensor<2x1x4x32xf32>, %k: tensor<2x100x2x32xf32>, %p: tensor<2x2x14x32xf32>, %off: index) -> tensor<2x1x2x4xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 16 branching = 2
      {schedule = #pisa.schedule<single_stage, q_tile = 1, io_two_stage = 0, io_single_stage = 0>, token_major}
      : tensor<2x1x4x32xf32>, tensor<2x100x2x32xf32>, tensor<2x2x14x32xf32> -> tensor<2x1x2x4xi32>
  return %s : tensor<2x1x2x4xi32>
}
