// RUN: pisa-opt %s --pisa-decompose-to-kernels --canonicalize --cse | FileCheck %s --check-prefix=KERNEL --enable-var-scope
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope

// pisa.lse_score with B, Nq, the children's rows and S dynamic: the sizes
// the verifier could not compare and the run-time query offset are host
// assertions, then one kernel op, then one kernel: a warp per (query, batch
// x KV head), the query's G = 4 head rows of d = 128 in registers (four
// elements per lane), and per candidate entry either -inf (a negative
// entry) or the online LSE over the node's valid children, 8 child rows
// in flight, the heads' LSEs summed across the lanes; lane 0 stores.

// KERNEL-LABEL: func.func @score
// KERNEL-SAME: (%[[Q:.*]]: tensor<?x8x?x128xbf16>, %[[K:.*]]: tensor<?x2x?x128xbf16>, %[[N:.*]]: tensor<?x2x?x?xi32>, %[[OFF:.*]]: index)
// KERNEL: cf.assert %{{.*}}, "pisa.lse_score: the children's batch differs from the queries'"
// KERNEL: cf.assert %{{.*}}, "pisa.lse_score: the candidates' batch differs from the queries'"
// KERNEL: cf.assert %{{.*}}, "pisa.lse_score: the candidates' Nq differs from the queries'"
// KERNEL: cf.assert %{{.*}}, "pisa.lse_score: B * Hkv is above the GPU limit of 65535 (grid y)"
// KERNEL: cf.assert %{{.*}}, "pisa.lse_score: Nq is above the GPU limit of 2147483647 (grid x)"
// KERNEL: %[[LOW:.*]] = arith.cmpi sge, %[[OFF]], %{{.*}} : index
// KERNEL: %[[HIGH:.*]] = arith.cmpi sle, %[[OFF]], %{{.*}} : index
// KERNEL: %[[IN:.*]] = arith.andi %[[LOW]], %[[HIGH]] : i1
// KERNEL: cf.assert %[[IN]], "pisa.lse_score: query_offset is outside [0, 2147483647]"
// KERNEL: %[[INIT:.*]] = tensor.empty(%{{.*}}, %{{.*}}, %{{.*}}) : tensor<?x2x?x?xf32>
// KERNEL: %[[U:.*]] = pisa.kernel.lse_score %[[Q]], %[[K]], %[[N]], %[[OFF]] outs(%[[INIT]]) level = 1 block_size = 64 branching = 2 scale = 0.0883883461
// KERNEL: return %[[U]]

// CHECK-LABEL: func.func @score
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
// CHECK: %[[GX:.*]] = arith.ceildivui %{{.*}}, %[[C4]] : index
// CHECK: gpu.launch_func @pisa_kernels::@lse_score blocks in (%[[GX]], %{{.*}}, %{{.*}}) threads in (%c128, %c1, %c1)

// CHECK: gpu.func @lse_score(%[[QK:.*]]: memref<?x8x?x128xbf16>, %[[KK:.*]]: memref<?x2x?x128xbf16>, %[[NK:.*]]: memref<?x2x?x?xi32>, %[[OFFK:.*]]: index, %[[UK:.*]]: memref<?x2x?x?xf32>) kernel
// CHECK-DAG: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[SCALE:.*]] = arith.constant 0.0883883461 : f32
// CHECK: %[[LANE:.*]] = arith.remui %{{.*}}, %c32 : index
// CHECK: scf.if
// CHECK: %[[POS:.*]] = arith.addi %[[OFFK]], %{{.*}} : index
// 4 heads x 4 elements of the query rows, loaded once.
// CHECK-COUNT-16: memref.load %[[QK]]
// CHECK: %[[WRITER:.*]] = arith.cmpi eq, %[[LANE]], %c0 : index
// CHECK: %[[S:.*]] = memref.dim %[[NK]], %c3
// CHECK: scf.for %[[SLOT:.*]] = %c0 to %[[S]] step %c1 {
// CHECK: %[[NODE:.*]] = memref.load %[[NK]][%{{.*}}, %{{.*}}, %{{.*}}, %[[SLOT]]]
// CHECK: %[[VALID:.*]] = arith.cmpi sge, %[[NODE]], %{{.*}} : i32
// CHECK: %[[SCORE:.*]] = scf.if %[[VALID]] -> (f32) {
// The valid children: those that exist, clamped to C, and the causal ones.
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: arith.addi %[[POS]], %c1
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c8 iter_args(%{{.*}} = %[[NEGINF]], %{{.*}} = %{{.*}}) -> (f32, f32) {
// CHECK: memref.load %[[KK]]
// CHECK: gpu.shuffle xor
// CHECK: arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK: math.exp
// CHECK: math.log
// CHECK: gpu.shuffle xor
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[NEGINF]] : f32
// CHECK: scf.if %[[WRITER]] {
// CHECK-NEXT: memref.store %[[SCORE]], %[[UK]][%{{.*}}, %{{.*}}, %{{.*}}, %[[SLOT]]]
func.func @score(%q: tensor<?x8x?x128xbf16>, %k: tensor<?x2x?x128xbf16>,
                 %n: tensor<?x2x?x?xi32>, %off: index) -> tensor<?x2x?x?xf32> {
  %u = pisa.lse_score %q, %k, %n, %off level = 1 block_size = 64 branching = 2
      : tensor<?x8x?x128xbf16>, tensor<?x2x?x128xbf16>, tensor<?x2x?x?xi32> -> tensor<?x2x?x?xf32>
  return %u : tensor<?x2x?x?xf32>
}

// A static result: extents the operands give at run time must match it,
// and a constant offset needs no assertion.
// KERNEL-LABEL: func.func @static_result
// KERNEL: cf.assert %{{.*}}, "pisa.lse_score: the result's dim 0 (2) is not the size the operands give"
// KERNEL: cf.assert %{{.*}}, "pisa.lse_score: the result's dim 2 (5) is not the size the operands give"
// KERNEL: cf.assert %{{.*}}, "pisa.lse_score: the result's dim 3 (7) is not the size the operands give"
// KERNEL-NOT: query_offset is outside
// KERNEL: pisa.kernel.lse_score {{.*}} level = 3 block_size = 16 branching = 4 scale = 5.000000e-01
func.func @static_result(%q: tensor<?x3x?x32xf16>, %c: tensor<?x1x?x32xf32>,
                         %n: tensor<?x1x?x?xi32>) -> tensor<2x1x5x7xf32> {
  %off = arith.constant 9 : index
  %u = pisa.lse_score %q, %c, %n, %off level = 3 block_size = 16 branching = 4 scale = 0.5
      : tensor<?x3x?x32xf16>, tensor<?x1x?x32xf32>, tensor<?x1x?x?xi32> -> tensor<2x1x5x7xf32>
  return %u : tensor<2x1x5x7xf32>
}
