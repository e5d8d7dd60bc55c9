// RUN: pisa-opt %s --pisa-decompose-to-kernels | FileCheck %s --enable-var-scope --check-prefix=KERNELS
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope

// Batched decode over caches, every size dynamic but the capacity: the
// append, then pisa.decode_select as the single-stage decode kernel whose
// warps read their sequence's length on the device.

// KERNELS-LABEL: func.func @decode_batch
// KERNELS: %[[P:.*]] = pisa.kernel.pyramid_append
// KERNELS: cf.assert %{{.*}}, "pisa.decode_select: the keys' batch differs from the queries'"
// KERNELS: cf.assert %{{.*}}, "pisa.decode_select: the pyramid's batch differs from the queries'"
// KERNELS: cf.assert %{{.*}}, "pisa.decode_select: the seq_lens' batch differs from the queries'"
// KERNELS: cf.assert %{{.*}}, "pisa.decode_select: B * Hkv is above the GPU limit of 65535 (grid y)"
// KERNELS: pisa.kernel.select_decode %{{.*}}, %{{.*}}, %[[P]], %{{.*}} outs(%{{.*}}) topk = 8 block_size = 64 branching = 2

// CHECK-LABEL: func.func @decode_batch
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x16x1x128xbf16>, %[[KC:[a-z0-9]+]]: memref<?x2x8192x128xbf16>, %[[PC:[a-z0-9]+]]: memref<?x2x255x128xf32>, %[[FROM:[a-z0-9]+]]: memref<?xi32>, %[[TO:[a-z0-9]+]]: memref<?xi32>
// CHECK: gpu.launch_func @pisa_kernels::@pyramid_append
// CHECK: %[[SEL:.*]] = gpu.alloc
// One query per block of 16 warps (Nq = 1): grid x = Nq, 512 threads.
// CHECK: gpu.launch_func @pisa_kernels::@select_decode blocks in (%c1, %{{.*}}, %c1) threads in (%c512, %c1, %c1) args(%[[Q]] : memref<?x16x1x128xbf16>, %[[KC]] : memref<?x2x8192x128xbf16>, %[[PC]] : memref<?x2x255x128xf32>, %[[TO]] : memref<?xi32>, %[[SEL]] : memref<?x2x1x8xi32>)
// CHECK: return %[[SEL]]
// The kernel: N_b = seq_lens[b] (b = block y / Hkv), checked against Nq = 1
// and the capacity; a broken length writes K entries of -2.
// CHECK: gpu.func @select_decode
// CHECK-SAME: workgroup(%[[SHARED:.*]] : memref<16xf32, #gpu.address_space<workgroup>>, %[[MASK:.*]] : memref<9xi32, #gpu.address_space<workgroup>>) private(
// CHECK-DAG: %[[M2:.*]] = arith.constant -2 : i32
// CHECK-DAG: %[[CAP:.*]] = arith.constant 8192 : index
// CHECK: %[[B:.*]] = arith.divui %{{.*}}, %c2 : index
// CHECK: %[[N32:.*]] = memref.load %{{.*}}[%[[B]]] : memref<?xi32>
// CHECK: %[[N:.*]] = arith.index_cast %[[N32]] : i32 to index
// CHECK: arith.cmpi sge, %[[N]], %c1 : index
// CHECK: arith.cmpi sle, %[[N]], %[[CAP]] : index
// g * K = 16 candidates fit the lanes: lane a holds candidate a (the
// causal ones by a ballot); a ranked level is scored on tensor cores, warp
// w candidates 4 w .. 4 w + 3 (bf16, G = 16, g = 2: the heads an m16 tile,
// the candidates' 8 child summaries an n8 tile, each f32 row split into a
// high half, its top 16 bits, and the rest), lanes 0-3 write the scores to
// the shared buffer, and after a barrier every lane reads its own
// candidate's back; warp 0 ranks it reading the others' scores from the
// same buffer (no shuffles), stores the kept set (a ballot, by lane 0) and
// the kept lanes in order (kept lane i at 1 + the kept ones below it), and
// after a barrier every lane reads the mask and its source, the
// (lane / g)-th kept lane (no search of the mask).
// No barrier before the scores' stores: the previous level's reads of the
// buffer came before its rank's barrier.
// CHECK: nvvm.vote.sync  ballot
// CHECK: scf.if
// CHECK-NOT: gpu.barrier
// CHECK: %[[FIRST:.*]] = arith.muli %{{.*}}, %c4 : index
// CHECK: scf.if
// CHECK: arith.andi %{{.*}}, %{{.*}} : vector<4xi32>
// CHECK: nvgpu.mma.sync
// CHECK: nvgpu.mma.sync
// CHECK: math.log2 %{{.*}} fastmath<afn> : f32
// CHECK: %[[A:.*]] = arith.addi %[[FIRST]], %{{.*}} : index
// CHECK: memref.store %{{.*}}, %[[SHARED]][%[[A]]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[SHARED]]
// CHECK: scf.if
// CHECK-NOT: gpu.shuffle
// CHECK: memref.load %[[SHARED]][%c0]
// CHECK-NOT: gpu.shuffle
// CHECK: memref.load %[[SHARED]][%c15]
// CHECK-NOT: gpu.shuffle
// CHECK: %[[KEPT:.*]] = nvvm.vote.sync  ballot
// CHECK: math.ctpop
// CHECK: %[[AT:.*]] = arith.addi %{{.*}}, %c1 : index
// CHECK: memref.store %{{.*}}, %[[MASK]][%[[AT]]]
// CHECK: memref.store %[[KEPT]], %[[MASK]][%c0]
// CHECK: gpu.barrier
// CHECK: %[[PAIR:.*]] = arith.minui %{{.*}}, %c7 : index
// CHECK: memref.load %[[MASK]][%c0]
// CHECK: %[[SOURCE:.*]] = arith.addi %[[PAIR]], %c1 : index
// CHECK: memref.load %[[MASK]][%[[SOURCE]]]
// A level that is not ranked while none has been (the walk's top levels):
// its kept set is a prefix, lane j's source is j / g and its next
// candidate node j, without the search or the shuffle.
// CHECK: } else {
// CHECK: nvvm.vote.sync  ballot
// CHECK: scf.if %{{.*}} -> (index) {
// CHECK-NEXT: scf.yield %[[PAIR0:.*]] : index
// CHECK: } else {
// CHECK: math.ctpop
// CHECK: scf.if %{{.*}} -> (index) {
// CHECK-NEXT: scf.yield %[[LANE:.*]] : index
// CHECK-NEXT: } else {
// CHECK-NEXT: arith.index_cast
// CHECK-NEXT: gpu.shuffle idx
// The leaves the same way, from the raw keys on tensor cores (bf16, G =
// 16: the heads an m16 tile, 8 keys an n8 tile), then the row on the lanes.
// A contender's keys all count: no key is masked, and the scale is applied
// in the exponent's fused multiply-add.
// CHECK: gpu.barrier
// CHECK: scf.for %[[L:.*]] = %[[WARP2:.*]] to %{{.*}} step %c16
// CHECK: nvgpu.mma.sync
// CHECK-NOT: arith.select
// CHECK: math.fma
// CHECK: memref.store %{{.*}}, %[[SHARED]][%[[L]]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[SHARED]]
// Warp 0 ranks the contenders by their position among them, reading the
// others' scores from the same buffer (no shuffles).
// CHECK: scf.if
// CHECK-NOT: gpu.shuffle
// CHECK: memref.load %[[SHARED]][%c0]
// CHECK-NOT: gpu.shuffle
// CHECK: memref.load %[[SHARED]][%c15]
// CHECK-NOT: gpu.shuffle
// CHECK: memref.store %c-1_i32
// CHECK: } else {
// CHECK: memref.store %[[M2]]
func.func @decode_batch(%q: tensor<?x16x1x128xbf16>, %kc: tensor<?x2x8192x128xbf16>,
                        %p: tensor<?x2x255x128xf32>, %from: tensor<?xi32>,
                        %to: tensor<?xi32>) -> tensor<?x2x1x8xi32> {
  %p1 = pisa.pyramid_append %kc, %p, %from, %to block_size = 64 branching = 2
      : tensor<?x2x8192x128xbf16>, tensor<?x2x255x128xf32>, tensor<?xi32>,
        tensor<?xi32> -> tensor<?x2x255x128xf32>
  %s = pisa.decode_select %q, %kc, %p1 seq_lens(%to) topk = 8 block_size = 64
      branching = 2 : tensor<?x16x1x128xbf16>, tensor<?x2x8192x128xbf16>,
      tensor<?x2x255x128xf32>, tensor<?xi32> -> tensor<?x2x1x8xi32>
  return %s : tensor<?x2x1x8xi32>
}

// g * K = 40 candidates do not fit the lanes: the block keeps the
// private-array walk, the threads ranking the scored candidates into a
// second shared buffer (thread t ranks candidate t) that the selection
// reads.
// CHECK-LABEL: gpu.func @select_decode_0
// CHECK-SAME: workgroup(%[[SCORES:.*]] : memref<40xf32, #gpu.address_space<workgroup>>, %[[RANKS:.*]] : memref<40xi32, #gpu.address_space<workgroup>>)
// CHECK: gpu.barrier
// CHECK: scf.for %[[A:.*]] = %{{.*}} to %{{.*}} step %c16
// CHECK: memref.store %{{.*}}, %[[SCORES]][%[[A]]]
// CHECK: gpu.barrier
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %{{.*}} step %c512
// CHECK: memref.store %{{.*}}, %[[RANKS]][%[[T]]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[RANKS]]
func.func @decode_batch_k20(%q: tensor<?x16x1x64xbf16>, %kc: tensor<?x1x4096x64xbf16>,
                            %p: tensor<?x1x127x64xf32>, %to: tensor<?xi32>)
    -> tensor<?x1x1x20xi32> {
  %s = pisa.decode_select %q, %kc, %p seq_lens(%to) topk = 20 block_size = 64
      branching = 2 : tensor<?x16x1x64xbf16>, tensor<?x1x4096x64xbf16>,
      tensor<?x1x127x64xf32>, tensor<?xi32> -> tensor<?x1x1x20xi32>
  return %s : tensor<?x1x1x20xi32>
}
