// RUN: pisa-opt %s --pisa-decompose-to-kernels | FileCheck %s --check-prefix=KERNELS --enable-var-scope
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope

// A packed varlen batch on the GPU (docs/semantics.md section 7, docs/gpu.md
// "Varlen"): grids from Tq, Tk and B only, every block or warp finding its
// sequence on the device, so nothing is read back to the host.

// The host checks what sizes alone decide; cu_seqlens' contents stay on
// the device.
// KERNELS-LABEL: func.func @select(
// KERNELS: cf.assert %{{.*}}, "pisa.pyramid_build_varlen: cu_seqlens has no sequence but there are key rows"
// KERNELS: pisa.kernel.pyramid_varlen %{{.*}}, %{{.*}} outs(%{{.*}}) block_size = 64 branching = 2 : tensor<?x2x64xf16>, tensor<?xi32>, tensor<?x2x64xf32> -> tensor<?x2x64xf32>
// KERNELS: cf.assert %{{.*}}, "pisa.hier_topk_varlen: cu_seqlens_q and cu_seqlens_k give different B"
// KERNELS: cf.assert %{{.*}}, "pisa.hier_topk_varlen: cu_seqlens_q has no sequence but there are query rows"
// KERNELS: pisa.kernel.select_single_stage_varlen {{.*}} topk = 8 block_size = 64 branching = 2 scale = 1.250000e-01

// CHECK-LABEL: func.func @select(
// The packed buffers are read as [1, H, T, X] views, without copies.
// CHECK: %[[KX:.*]] = memref.expand_shape %{{.*}} {{\[}}[0, 1], [2], [3]] output_shape [1, %{{.*}}, 2, 64] : memref<?x2x64xf16> into memref<1x?x2x64xf16>
// CHECK: %[[KV:.*]] = memref.transpose %[[KX]] (d0, d1, d2, d3) -> (d0, d2, d1, d3)
// CHECK: gpu.launch_func @pisa_kernels::@pyramid_varlen_leaves blocks in (%{{.*}}, %c2, %c1) threads in (%c64, %c1, %c1) args(%[[KV]] : {{.*}}, %arg3 : memref<?xi32>
// One level launch per level of N = Tk, in a host loop.
// CHECK: scf.for %[[LEVEL:.*]] = %c2 to
// CHECK: gpu.launch_func @pisa_kernels::@pyramid_varlen_level {{.*}} args({{.*}}, %arg3 : memref<?xi32>, %{{.*}} : index, %[[LEVEL]] : index, %{{.*}} : index)
// CHECK: gpu.launch_func @pisa_kernels::@select_single_stage_varlen blocks in (%{{.*}}, %c2, %c1) threads in (%c128, %c1, %c1) args({{.*}}, %arg2 : memref<?xi32>, %arg3 : memref<?xi32>, %{{.*}} : memref<1x2x?x8xi32, strided<[?, 8, 16, 1]>>)

// A leaf block finds its sequence by a binary search of the first slots
// floor(cu_k[s] / C) + s, and writes only a leaf that exists in a batch
// whose cu_seqlens keep the rules.
// CHECK-LABEL: gpu.func @pyramid_varlen_leaves(
// CHECK: scf.while
// CHECK: memref.load %{{.*}} : memref<?xi32>
// CHECK: arith.divui %{{.*}}, %c64
// CHECK: arith.cmpi sle
// CHECK: scf.for {{.*}} -> (i1)
// CHECK: scf.if
// CHECK: memref.store

// A level block computes its sequence's level offsets (a loop over the
// levels below) and returns when the sequence has no such level.
// CHECK-LABEL: gpu.func @pyramid_varlen_level(
// CHECK: scf.while
// CHECK: scf.for {{.*}} = %c2 to %arg3
// CHECK: arith.cmpi ugt, %{{.*}}, %c1
// CHECK: scf.if

// A query warp: binary search of cu_q, then the batch's rules (one pass
// over cu_seqlens) and its sequence's bounds, then the walk over that
// sequence's layout computed on the device; when a rule breaks, the row is
// K entries of -2.
// CHECK-LABEL: gpu.func @select_single_stage_varlen(
// CHECK-DAG: %[[INVALID:.*]] = arith.constant -2 : i32
// CHECK: scf.while
// CHECK: memref.load %arg3
// CHECK: memref.load %arg4
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (i1)
// CHECK: scf.if %{{.*}} {
// CHECK: scf.while
// CHECK: gpu.shuffle xor
// CHECK: } else {
// CHECK: memref.store %[[INVALID]], %arg5
func.func @select(%q: tensor<?x8x64xf16>, %k: tensor<?x2x64xf16>, %cuq: tensor<?xi32>, %cuk: tensor<?xi32>) -> tensor<?x2x8xi32> {
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cuk) block_size = 64 branching = 2 : tensor<?x2x64xf16>, tensor<?xi32> -> tensor<?x2x64xf32>
  %sel = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = 8 block_size = 64 branching = 2 : tensor<?x8x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x2x8xi32>
  return %sel : tensor<?x2x8xi32>
}

// -----

// Two-stage (the schedule the crossover rule picks for this setting): the
// batched two-stage kernel ops on the packed batch seen as a batch of one,
// token-major, with cu_seqlens; the pyramid's fragment planes are made from
// the packed [1, R, Hkv, d] pyramid, and the selection is the caller's
// [Tq, Hkv, K] buffer seen as [1, Tq, Hkv, K].
// KERNELS-LABEL: func.func @two_stage(
// KERNELS: pisa.kernel.pyramid_varlen
// KERNELS: cf.assert %{{.*}}, "pisa.hier_topk_varlen: Tq * g * K is above the GPU limit of 2147483647 (32-bit stage-2 pair indices)"
// KERNELS: %[[SEL:.*]] = tensor.empty(%{{.*}}) : tensor<?x1x8xi32>
// KERNELS: tensor.expand_shape %[[SEL]] {{\[}}[0, 1], [2], [3]] output_shape [1, %{{.*}}, 1, 8] : tensor<?x1x8xi32> into tensor<1x?x1x8xi32>
// KERNELS: pisa.kernel.fragment_planes %{{.*}} outs(%{{.*}}) {token_major} : tensor<1x?x1x128xf32>, tensor<1x1x?x256xbf16>
// KERNELS: pisa.kernel.walk {{.*}} cu_seqlens(%arg2, %arg3 : tensor<?xi32>, tensor<?xi32>) {{.*}} {tensor_cores, token_major}
// KERNELS: pisa.kernel.bucket {{.*}} cu_seqlens(%arg2, %arg3 : tensor<?xi32>, tensor<?xi32>)
// KERNELS: pisa.kernel.score_tiles {{.*}} cu_seqlens(%arg2, %arg3 : tensor<?xi32>, tensor<?xi32>) {{.*}} {token_major}
// KERNELS: %[[FINAL:.*]] = pisa.kernel.select_final {{.*}} cu_seqlens(%arg2, %arg3 : tensor<?xi32>, tensor<?xi32>) {{.*}} {token_major}
// KERNELS: tensor.collapse_shape %[[FINAL]] {{\[}}[0, 1], [2], [3]] : tensor<1x?x1x8xi32> into tensor<?x1x8xi32>
func.func @two_stage(%q: tensor<?x16x128xbf16>, %k: tensor<?x1x128xbf16>, %cuq: tensor<?xi32>, %cuk: tensor<?xi32>) -> tensor<?x1x8xi32> {
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cuk) block_size = 64 branching = 2 : tensor<?x1x128xbf16>, tensor<?xi32> -> tensor<?x1x128xf32>
  %sel = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = 8 block_size = 64 branching = 2 {schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 0, io_single_stage = 0>} : tensor<?x16x128xbf16>, tensor<?x1x128xbf16>, tensor<?x1x128xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x1x8xi32>
  return %sel : tensor<?x1x8xi32>
}
