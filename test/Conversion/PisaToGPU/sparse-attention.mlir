// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu | FileCheck %s --enable-var-scope --check-prefix=NOBAR

// Sparse attention with B, N and Nq dynamic, G = 16, d = dv = 128, C = 64
// (the paper's setting, two KV heads): the G heads fit one m16 tile, so the
// register kernel (AttentionInRegisters.cpp) takes it: four warps per
// four consecutive queries of a batch x KV head, warp w attending query w
// from its list to its output rows with S, P and O in registers and only V
// staged, in its own shared slot; no block barrier.
// (sparse-attention-staged.mlir has the kernel for G > 16.)

// CHECK-LABEL: func.func @attend
// The grid is (ceil(Nq / 4), B x Hkv) x 128 threads with four V tiles of
// 64 x 136 bf16 (17408 bytes each) and four lists of 8 blocks: 69760 bytes.
// CHECK-DAG: %[[SMEM:.*]] = arith.constant 69760 : i32
// CHECK-DAG: %[[GX:.*]] = arith.ceildivui %{{.*}}, %c4 : index
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention blocks in (%[[GX]], %{{.*}}, %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %[[SMEM]]

// CHECK: gpu.func @sparse_attention
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-SAME: nvvm.minctasm = 2
// CHECK-DAG: %[[WARP:.*]] = arith.divui %{{.*}}, %c32 : index
// CHECK-DAG: %[[LANE:.*]] = arith.remui %{{.*}}, %c32 : index
// CHECK-DAG: %[[BYTES:.*]] = gpu.dynamic_shared_memory
// The warp's list after the four slots, and its V tile in its slot.
// CHECK-DAG: %[[LOFF0:.*]] = arith.muli %[[WARP]], %c32 : index
// CHECK-DAG: %[[LOFF:.*]] = arith.addi %[[LOFF0]], %c69632 : index
// CHECK-DAG: %[[LIST:.*]] = memref.view %[[BYTES]][%[[LOFF]]][] : {{.*}} to memref<8xi32, #gpu.address_space<workgroup>>
// CHECK-DAG: %[[SLOT:.*]] = arith.muli %[[WARP]], %c17408 : index
// CHECK-DAG: %[[VTILE:.*]] = memref.view %[[BYTES]][%[[SLOT]]][] : {{.*}} to memref<64x136xbf16, #gpu.address_space<workgroup>>
// Warp w's query is 4 x block + w (those below Nq).
// CHECK: %[[FIRST:.*]] = arith.muli %{{.*}}, %c4 : index
// CHECK: %[[QUERY:.*]] = arith.addi %[[FIRST]], %[[WARP]] : index
// CHECK: %[[REAL:.*]] = arith.cmpi ult, %[[QUERY]], %{{.*}} : index
// CHECK: scf.if %[[REAL]] {
// The attended blocks into the warp's list, lane l taking entry l (K = 8:
// one chunk of 32): the largest valid entry below it (a prefix max over
// the lanes), a ballot of the attended ones, each stored at the count of
// those below it; then a warp sync.
// CHECK: memref.load %{{.*}} : memref<?x2x?x8xi32>
// CHECK-COUNT-6: gpu.shuffle  up
// CHECK: %[[ATTENDED:.*]] = nvvm.vote.sync  ballot
// CHECK: scf.if
// CHECK-NEXT: memref.store %{{.*}}, %[[LIST]][%{{.*}}]
// CHECK: %[[COUNT32:.*]] = math.ctpop %[[ATTENDED]] : i32
// CHECK: %[[COUNT:.*]] = arith.index_cast %[[COUNT32]] : i32 to index
// CHECK: nvvm.bar.warp.sync
// Every entry of the list: the state is the max and sum of the warp's two
// head rows and O's 16 n8 accumulators.
// CHECK: %[[LOOP:.*]]:20 = scf.for %[[J:.*]] = %c0 to %[[COUNT]] step %c1 iter_args({{.*}}) -> (f32, f32, f32, f32, vector<2x2xf32>,
// CHECK: memref.load %[[LIST]][%[[J]]]
// CHECK: nvvm.bar.warp.sync
// V's 64 rows copied asynchronously into the warp's tile, zero-filled past
// N, through L1 (the block's other queries attend many of the same blocks).
// CHECK-COUNT-32: nvgpu.device_async_copy %{{.*}}, %[[VTILE]][%{{.*}}], 8, %{{.*}} : memref<?x2x?x128xbf16> to memref<64x136xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[COPIED:.*]] = nvgpu.device_async_create_group
// S = Q K^T on tensor cores, the keys straight from global memory.
// CHECK: vector.load %{{.*}} : memref<?x2x?x128xbf16>, vector<8xbf16>
// CHECK-COUNT-64: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xbf16>, vector<2x2xbf16>, vector<2x2xf32>) -> vector<2x2xf32>
// The online softmax on the accumulators, in base 2.
// CHECK: gpu.shuffle xor
// CHECK: math.exp2
// P's fragments, V from the tile, O = O alpha + P V.
// CHECK: arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK: nvgpu.device_async_wait %[[COPIED]] {numGroups = 0 : i32}
// CHECK: nvvm.bar.warp.sync
// CHECK: nvgpu.ldmatrix %[[VTILE]][%{{.*}}] {numTiles = 2 : i32, transpose = true} : memref<64x136xbf16, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
// CHECK: nvgpu.mma.sync
// CHECK: scf.yield
// The rows through the warp's slot: the warp is done with its V tile,
// writes O, max and sum, and each lane stores 16-byte chunks of the rows
// divided by their sums (row, query 4 x block + w, column).
// CHECK: nvvm.bar.warp.sync
// CHECK: %[[RESULT:.*]] = memref.view %[[BYTES]][%[[SLOT]]][] : {{.*}} to memref<2080xf32, #gpu.address_space<workgroup>>
// CHECK: vector.store %{{.*}}, %[[RESULT]][%{{.*}}] : memref<2080xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK: nvvm.bar.warp.sync
// CHECK: vector.load %[[RESULT]][%{{.*}}] : memref<2080xf32, #gpu.address_space<workgroup>>, vector<8xf32>
// CHECK: math.log2
// CHECK: arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %[[QUERY]], %{{.*}}] {{.*}} : memref<?x32x?x128xbf16>, vector<8xbf16>
// CHECK: gpu.return

// The warps attend their queries apart: not one block barrier.
// NOBAR-LABEL: gpu.func @sparse_attention
// NOBAR-NOT: gpu.barrier
// NOBAR: gpu.return

func.func @attend(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x2x?x128xbf16>,
                  %v: tensor<?x2x?x128xbf16>, %s: tensor<?x2x?x8xi32>, %off: index)
    -> (tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) {
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 64
      : tensor<?x32x?x128xbf16>, tensor<?x2x?x128xbf16>, tensor<?x2x?x128xbf16>,
        tensor<?x2x?x8xi32> -> tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>
  return %o, %l : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>
}
