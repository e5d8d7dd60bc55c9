// RUN: pisa-opt %s --pisa-select-schedule --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope

// One program for every B, N and Nq: kernels read sizes from
// their buffers, the layout comes from N at run time, grids and buffers are
// sized at run time, launches of empty grids are skipped, and what only
// run time can check is a host assertion.

// CHECK-LABEL: func.func @select(
// The pyramid: its rows computed from N (a loop over the levels), one
// launch per level wider than 32 nodes (1024 threads / d = 128, four
// passes) in a host loop, each skipped when empty; then one launch for the
// levels above, from the last level built (skipped when N <= C).
// CHECK: %[[LAYOUT:.*]]:3 = scf.while
// CHECK: gpu.alloc (%{{.*}}, %[[LAYOUT]]#2) : memref<?x1x?x128xf32>
// CHECK: scf.if
// CHECK-NEXT: gpu.launch_func @pisa_kernels::@pyramid_leaves
// CHECK: %[[TOP:.*]]:2 = scf.for
// CHECK: %[[WIDE:.*]] = arith.cmpi ugt, %{{.*}}, %c32 : index
// CHECK: scf.if
// CHECK-NEXT: gpu.launch_func @pisa_kernels::@pyramid_level
// CHECK: arith.select %[[WIDE]]
// CHECK: arith.cmpi ugt, %[[TOP]]#1, %c1 : index
// CHECK: scf.if
// CHECK-NEXT: gpu.launch_func @pisa_kernels::@pyramid_top_levels blocks in (%{{.*}}, %{{.*}}, %c1) threads in (%c1024, %c1, %c1) args(%{{.*}} : memref<?x1x?x128xf32>, %[[TOP]]#0 : index, %[[TOP]]#1 : index)
// Rules on sizes, then the selection sized [B, Hkv, Nq, K].
//   The pyramid comes from pyramid_build of the same keys: its rows rule
//   folds away (the same layout value after CSE).
// CHECK: cf.assert %{{.*}}, "pisa.hier_topk: the keys' batch differs from the queries'"
// CHECK-NOT: the pyramid's rows
// CHECK: cf.assert %{{.*}}, "pisa.hier_topk: query_offset + Nq exceeds N"
// CHECK: cf.assert %{{.*}}, "pisa.hier_topk: B * Hkv is above the GPU limit of 65535 (grid y)"
// CHECK: cf.assert %{{.*}}, "pisa.hier_topk: N is above the GPU limit of 2147483647 (32-bit leaf indices)"
// CHECK: %[[SEL:.*]] = gpu.alloc (%[[B:.*]], %[[NQ:.*]]) : memref<?x1x?x8xi32>
// CHECK: gpu.alloc (%[[B]], %{{.*}}) : memref<?x1x?x256xbf16>
// CHECK: gpu.alloc (%[[B]], %[[NQ]]) : memref<?x1x?x16xi32>
// The walk and the final kernel take N as a parameter (no keys buffer).
// CHECK: gpu.launch_func @pisa_kernels::@select_stage1_walk {{.*}}, %[[N:.*]] : index)
// CHECK: gpu.launch_func @pisa_kernels::@select_stage2_score_tiles_wgmma
// CHECK: gpu.launch_func @pisa_kernels::@select_final {{.*}}, %[[SEL]] : memref<?x1x?x8xi32>, %[[N]] : index)
// CHECK: return
func.func @select(%q: tensor<?x16x?x128xbf16>, %k: tensor<?x1x?x128xbf16>, %off: index) -> tensor<?x1x?x8xi32> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 : tensor<?x1x?x128xbf16> -> tensor<?x1x?x128xf32>
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<?x16x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x128xf32> -> tensor<?x1x?x8xi32>
  return %s : tensor<?x1x?x8xi32>
}

// Decode (single stage).
// CHECK-LABEL: func.func @decode(
//   A pyramid passed in is checked against the keys' N.
// CHECK: cf.assert %{{.*}}, "pisa.hier_topk: the pyramid's rows are not the layout of the keys' N"
// CHECK: gpu.launch_func @pisa_kernels::@select_single_stage
func.func @decode(%q: tensor<?x4x1x64xf32>, %k: tensor<?x2x?x64xf32>, %p: tensor<?x2x?x64xf32>, %off: index) -> tensor<?x2x1x4xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 16 branching = 4
      {schedule = #pisa.schedule<single_stage, q_tile = 1, io_two_stage = 0, io_single_stage = 0>}
      : tensor<?x4x1x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32> -> tensor<?x2x1x4xi32>
  return %s : tensor<?x2x1x4xi32>
}

// The walk computes the layout from N and walks it with a loop (a static N
// unrolls the levels instead), on tensor cores here.
// CHECK-LABEL: gpu.func @select_stage1_walk(
// CHECK-SAME: %{{.*}}: memref<?x16x?x128xbf16>, %{{.*}}: memref<?x1x?x256xbf16>, %{{.*}}: index, %{{.*}}: memref<?x1x?x16xi32>, %{{.*}}: memref<?x1x?xi32>, %{{.*}}: index)
// CHECK: scf.while
// CHECK: scf.for
// CHECK: nvgpu.mma.sync
// CHECK: gpu.return

// The single-stage kernel reads N from its keys buffer.
// CHECK-LABEL: gpu.func @select_single_stage(
// CHECK: memref.dim
// CHECK: scf.while
// CHECK: scf.for
