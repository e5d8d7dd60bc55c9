// RUN: pisa-opt %s --pisa-decompose-to-kernels | FileCheck %s --enable-var-scope --check-prefix=KERNELS
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope

// Sparse attention with B, N and Nq dynamic, G = 32, d = dv = 128, C = 64:
// G above one m16 tile takes the staged kernel (sparse-attention.mlir has
// the register kernel): one kernel op, then one kernel of four warps per
// (query, batch x KV head) whose tiles are carved out of dynamic shared
// memory.

// KERNELS-LABEL: func.func @attend
// KERNELS: cf.assert %{{.*}}, "pisa.sparse_attention: the keys' batch differs from the queries'"
// KERNELS: cf.assert %{{.*}}, "pisa.sparse_attention: the values' batch differs from the queries'"
// KERNELS: cf.assert %{{.*}}, "pisa.sparse_attention: the values' N differs from the keys'"
// KERNELS: cf.assert %{{.*}}, "pisa.sparse_attention: the selection's batch differs from the queries'"
// KERNELS: cf.assert %{{.*}}, "pisa.sparse_attention: the selection's Nq differs from the queries'"
// KERNELS: cf.assert %{{.*}}, "pisa.sparse_attention: B * Hkv is above the GPU limit of 65535 (grid y)"
// KERNELS: %[[O:.*]] = tensor.empty(%{{.*}}, %{{.*}}) : tensor<?x64x?x128xbf16>
// KERNELS: %[[L:.*]] = tensor.empty(%{{.*}}, %{{.*}}) : tensor<?x64x?xf32>
// KERNELS: pisa.kernel.sparse_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} outs(%[[O]], %[[L]]) block_size = 64 scale = 0.0883883461

// CHECK-LABEL: func.func @attend
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x64x?x128xbf16>
// The grid is (Nq, B x Hkv) x 128 threads with the tiles' 73760 bytes of
// dynamic shared memory (Q, K, V, S, P and O of 32 rows, the block list).
// CHECK-DAG: %[[SMEM:.*]] = arith.constant 73760 : i32
// CHECK-DAG: %[[NQ:.*]] = memref.dim %[[Q]], %c2
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention blocks in (%[[NQ]], %{{.*}}, %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %[[SMEM]]

// CHECK: gpu.func @sparse_attention
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-SAME: nvvm.minctasm = 3
// CHECK: %[[BYTES:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.view %[[BYTES]][%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<32x136xbf16, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.view %[[BYTES]][%c8704][] : {{.*}} to memref<64x136xbf16, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.view %[[BYTES]][%c26112][] : {{.*}} to memref<64x136xbf16, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.view %[[BYTES]][%c43520][] : {{.*}} to memref<32x68xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.view %[[BYTES]][%c52224][] : {{.*}} to memref<32x72xbf16, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.view %[[BYTES]][%c56832][] : {{.*}} to memref<32x132xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: %[[LIST:.*]] = memref.view %[[BYTES]][%c73728][] : {{.*}} to memref<8xi32, #gpu.address_space<workgroup>>
// The attended blocks into the list, each warp walking the row with a
// lane an entry (K = 8: one chunk): an entry is used when 0 <= s <
// ceil(N / C) and s > every valid entry before it (a prefix max by
// shuffles), attended when it starts at or before the query, and written
// at the count of attended entries before it (a ballot) by the first
// warp; every thread gets the count.
// CHECK: %[[FIRSTWARP:.*]] = arith.cmpi ult, %thread_id_x, %c32 : index
// CHECK: %[[LANE:.*]] = arith.remui %thread_id_x, %c32 : index
// CHECK: %[[ENTRY:.*]] = arith.minui %[[LANE]], %c7 : index
// CHECK: %[[S32:.*]] = memref.load %{{.*}}[%{{.*}}, %{{.*}}, %block_id_x, %[[ENTRY]]]
// CHECK: %[[S:.*]] = arith.index_cast %[[S32]] : i32 to index
// CHECK-DAG: arith.cmpi sge, %[[S]], %c0
// CHECK-DAG: arith.cmpi slt, %[[S]], %{{.*}}
// CHECK: gpu.shuffle  up %{{.*}}, %c1_i32, %c32_i32 : i32
// CHECK: gpu.shuffle  up %{{.*}}, %c16_i32, %c32_i32 : i32
// CHECK: %[[BEFORE:.*]] = arith.maxsi %{{.*}}, %c-1_i32 : i32
// CHECK: arith.cmpi sgt, %[[S32]], %[[BEFORE]] : i32
// CHECK: %[[MASK:.*]] = nvvm.vote.sync  ballot %c-1_i32, %[[ATTENDED:.*]] -> i32
// CHECK: %[[AT:.*]] = math.ctpop
// CHECK: %[[AT_INDEX:.*]] = arith.index_cast %[[AT]] : i32 to index
// CHECK: %[[STORES:.*]] = arith.andi %[[ATTENDED]], %[[FIRSTWARP]] : i1
// CHECK: scf.if %[[STORES]] {
// CHECK: memref.store %[[S32]], %[[LIST]][%[[AT_INDEX]]]
// CHECK: %[[COUNT:.*]] = math.ctpop %[[MASK]] : i32
// CHECK: %[[WALK:.*]] = arith.index_cast %[[COUNT]] : i32 to index
// CHECK: gpu.barrier
// Q's tile is read once, before the loop (its fragments stay in registers).
// CHECK: %[[QT:.*]] = vector.transfer_read %{{.*}} : memref<32x136xbf16, #gpu.address_space<workgroup>>, vector<32x128xbf16>
// Per attended block: stage, score, softmax, accumulate.
// CHECK: scf.for %{{.*}} = %c0 to %[[WALK]] step %c1 iter_args(%{{.*}} = %cst{{.*}}, %{{.*}} = %cst{{.*}}) -> (f32, f32)
// CHECK: gpu.barrier
// CHECK: gpu.barrier
// Warp w scores the block's keys [16 w, 16 w + 16) against the 32 rows ...
// CHECK: vector.contract {{.*}} %[[QT]], {{.*}} : vector<32x128xbf16>, vector<16x128xbf16> into vector<32x16xf32>
// CHECK: gpu.barrier
// ... the row's online softmax in base 2 (O rescaled only when its
// max grew: alpha != 1) ...
// CHECK: math.exp2
// CHECK: gpu.shuffle xor
// CHECK: %[[GREW:.*]] = arith.cmpf une, %{{.*}}, %cst
// CHECK: scf.if %[[GREW]]
// CHECK: arith.mulf %{{.*}} : vector<32xf32>
// CHECK: gpu.barrier
// ... and accumulates P V onto its 32 columns of O in shared memory.
// CHECK: %[[ACC:.*]] = vector.transfer_read %{{.*}} : memref<32x132xf32, #gpu.address_space<workgroup>>, vector<32x32xf32>
// CHECK: %[[PV:.*]] = vector.contract {{.*}}, %[[ACC]] : vector<32x64xbf16>, vector<64x32xbf16> into vector<32x32xf32>
// CHECK: vector.transfer_write %[[PV]]
// The rows with no key: o = 0, lse = -inf.
// CHECK: gpu.barrier
// CHECK: arith.cmpf oeq, %{{.*}}, %cst
// CHECK: arith.truncf %{{.*}} : vector<32xf32> to vector<32xbf16>
// CHECK: gpu.return
func.func @attend(%q: tensor<?x64x?x128xbf16>, %k: tensor<?x2x?x128xbf16>,
                  %v: tensor<?x2x?x128xbf16>, %s: tensor<?x2x?x8xi32>, %off: index)
    -> (tensor<?x64x?x128xbf16>, tensor<?x64x?xf32>) {
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 64
      : tensor<?x64x?x128xbf16>, tensor<?x2x?x128xbf16>, tensor<?x2x?x128xbf16>,
        tensor<?x2x?x8xi32> -> tensor<?x64x?x128xbf16>, tensor<?x64x?xf32>
  return %o, %l : tensor<?x64x?x128xbf16>, tensor<?x64x?xf32>
}
