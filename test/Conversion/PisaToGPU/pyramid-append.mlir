// RUN: pisa-opt %s --pisa-select-schedule=keep-existing=1 --pisa-decompose-to-kernels | FileCheck %s --enable-var-scope --check-prefix=KERNELS
// RUN: pisa-opt %s --pisa-select-schedule=keep-existing=1 --pisa-decompose-to-kernels %bufferize --pisa-fuse-decode-append --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope

// A decode step over a pyramid cache (docs/semantics.md, section 4):
// pisa.pyramid_append updates the cache argument in place (no copy: the
// old cache is not used again) and the single-stage selection reads the
// cache's capacity layout. On the GPU, --pisa-fuse-decode-append makes
// them one kernel op, whose kernel runs the append first, in the same
// blocks: one launch (docs/gpu.md; test/Transforms/fuse-decode-append.mlir
// has the pass's own cases).

// KERNELS-LABEL: func.func @decode_step
// KERNELS-SAME: %[[Q:[a-z0-9]+]]: tensor<1x16x1x128xbf16>, %[[KC:[a-z0-9]+]]: tensor<1x1x8192x128xbf16>, %[[PC:[a-z0-9]+]]: tensor<1x1x255x128xf32>, %[[FROM:[a-z0-9]+]]: tensor<1xi32>, %[[TO:[a-z0-9]+]]: tensor<1xi32>
// KERNELS: %[[P:.*]] = pisa.kernel.pyramid_append %[[KC]], %[[FROM]], %[[TO]] outs(%[[PC]]) block_size = 64 branching = 2
// KERNELS: pisa.kernel.select_single_stage %[[Q]], %{{.*}}, %[[P]], %{{.*}} outs(%{{.*}}) {{.*}} capacity = 8192

// CHECK-LABEL: func.func @decode_step
// CHECK-SAME: %[[KC:[a-z0-9]+]]: memref<1x1x8192x128xbf16>, %[[PC:[a-z0-9]+]]: memref<1x1x255x128xf32>, %[[FROM:[a-z0-9]+]]: memref<1xi32>, %[[TO:[a-z0-9]+]]: memref<1xi32>
// CHECK-NOT: memref.copy
// CHECK-NOT: gpu.memcpy
// CHECK-NOT: @pyramid_append
// CHECK: %[[K:.*]] = memref.subview %[[KC]]
// CHECK-NOT: @pyramid_append
// CHECK: gpu.launch_func @pisa_kernels::@append_select_single_stage blocks in (%c1, %c1, %c1) threads in (%c512, %c1, %c1) args(%{{.*}}, %[[K]] : {{.*}}, %[[PC]] : memref<1x1x255x128xf32>, %{{.*}}, %{{.*}}, %[[KC]] : memref<1x1x8192x128xbf16>, %[[FROM]] : memref<1xi32>, %[[TO]] : memref<1xi32>)
// CHECK-NOT: gpu.launch_func
// CHECK: return
func.func @decode_step(%q: tensor<1x16x1x128xbf16>, %kc: tensor<1x1x8192x128xbf16>,
                       %p: tensor<1x1x255x128xf32>, %from: tensor<1xi32>,
                       %to: tensor<1xi32>, %n: index) -> tensor<1x1x1x8xi32> {
  %p1 = pisa.pyramid_append %kc, %p, %from, %to block_size = 64 branching = 2
      : tensor<1x1x8192x128xbf16>, tensor<1x1x255x128xf32>, tensor<1xi32>,
        tensor<1xi32> -> tensor<1x1x255x128xf32>
  %k = tensor.extract_slice %kc[0, 0, 0, 0] [1, 1, %n, 128] [1, 1, 1, 1]
      : tensor<1x1x8192x128xbf16> to tensor<1x1x?x128xbf16>
  %c1 = arith.constant 1 : index
  %t = arith.subi %n, %c1 : index
  %s = pisa.hier_topk %q, %k, %p1, %t topk = 8 block_size = 64 branching = 2
      capacity = 8192 : tensor<1x16x1x128xbf16>, tensor<1x1x?x128xbf16>,
      tensor<1x1x255x128xf32> -> tensor<1x1x1x8xi32>
  return %s : tensor<1x1x1x8xi32>
}

// The old cache is returned too: the append writes a copy, in its own
// kernel.
// CHECK-LABEL: func.func @keep_old
// CHECK: %[[NEW:.*]] = gpu.alloc
// CHECK: gpu.memcpy %[[NEW]]
// CHECK: gpu.launch_func @pisa_kernels::@pyramid_append blocks in (%c1, %c2, %c1) threads in (%c1024, %c1, %c1) args({{.*}}, %[[NEW]] : memref<2x1x7x16xf32>)
func.func @keep_old(%k: tensor<2x1x200x16xf16>, %p: tensor<2x1x7x16xf32>,
                    %from: tensor<2xi32>, %to: tensor<2xi32>)
    -> (tensor<2x1x7x16xf32>, tensor<2x1x7x16xf32>) {
  %p1 = pisa.pyramid_append %k, %p, %from, %to block_size = 64 branching = 2
      : tensor<2x1x200x16xf16>, tensor<2x1x7x16xf32>, tensor<2xi32>,
        tensor<2xi32> -> tensor<2x1x7x16xf32>
  return %p, %p1 : tensor<2x1x7x16xf32>, tensor<2x1x7x16xf32>
}

// Two queries (speculative decode) have two blocks per sequence: each
// would append, so the append keeps its own kernel.
// CHECK-LABEL: func.func @two_queries
// CHECK: gpu.launch_func @pisa_kernels::@pyramid_append_0
// CHECK: gpu.launch_func @pisa_kernels::@select_single_stage
func.func @two_queries(%q: tensor<1x16x2x128xbf16>, %kc: tensor<1x1x8192x128xbf16>,
                       %p: tensor<1x1x255x128xf32>, %from: tensor<1xi32>,
                       %to: tensor<1xi32>, %n: index) -> tensor<1x1x2x8xi32> {
  %p1 = pisa.pyramid_append %kc, %p, %from, %to block_size = 64 branching = 2
      : tensor<1x1x8192x128xbf16>, tensor<1x1x255x128xf32>, tensor<1xi32>,
        tensor<1xi32> -> tensor<1x1x255x128xf32>
  %k = tensor.extract_slice %kc[0, 0, 0, 0] [1, 1, %n, 128] [1, 1, 1, 1]
      : tensor<1x1x8192x128xbf16> to tensor<1x1x?x128xbf16>
  %c2 = arith.constant 2 : index
  %t = arith.subi %n, %c2 : index
  %s = pisa.hier_topk %q, %k, %p1, %t topk = 8 block_size = 64 branching = 2
      capacity = 8192 {schedule = #pisa.schedule<single_stage, q_tile = 4,
      io_two_stage = 1, io_single_stage = 1>}
      : tensor<1x16x2x128xbf16>, tensor<1x1x?x128xbf16>,
      tensor<1x1x255x128xf32> -> tensor<1x1x2x8xi32>
  return %s : tensor<1x1x2x8xi32>
}

// The decode step's kernel, a block of 512 threads: the append first, from
// and to read on the device, a sequence outside the rules left as it is.
// Keys that all fall in the last leaf (a decode step): row 0's threads sum
// its keys 32 at a time, then the path's 7 nodes (8192 keys: 128 leaves)
// in registers, each stored if its level exists. Otherwise the leaves from
// from / C (rows of 128 features, 4 at a time), then 7 levels, a barrier
// after each. Then the selection: the query's rows loaded, a barrier (the
// cache's new nodes visible to every warp), the walk.
// CHECK: gpu.func @append_select_single_stage
// CHECK-SAME: known_block_size = array<i32: 512, 1, 1>, nvvm.minctasm = 1 : i32
// CHECK: %[[F:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<1xi32>
// CHECK: %[[T:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<1xi32>
// CHECK: arith.cmpi slt, %[[F]], %[[T]] : i32
// CHECK: scf.if
// CHECK: scf.if
// CHECK-NOT: gpu.barrier
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c32 iter_args
// CHECK-NOT: gpu.barrier
// CHECK: arith.divf
// CHECK-NOT: gpu.barrier
// CHECK: memref.store
// CHECK-NOT: gpu.barrier
// CHECK-COUNT-7: arith.divf
// No barrier anywhere in the last-leaf path, up to the general path's
// leaf loop.
// CHECK-NOT: gpu.barrier
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c4
// CHECK: arith.divf
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %c0 to %c7 step %c1
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c4
// CHECK: arith.divf
// CHECK: gpu.barrier
// CHECK: vector.load {{.*}} vector<8xbf16>
// CHECK-NOT: nvvm.vote.sync
// CHECK: gpu.barrier
// CHECK: nvvm.vote.sync ballot
// CHECK: gpu.return
// The append's own kernel: rows of 16 features, 1024 threads.
// CHECK: gpu.func @pyramid_append(
// CHECK-SAME: known_block_size = array<i32: 1024, 1, 1>, nvvm.minctasm = 1 : i32
