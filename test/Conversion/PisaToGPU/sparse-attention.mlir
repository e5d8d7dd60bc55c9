// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope

// Sparse attention with B, N and Nq dynamic, G = 16, d = dv = 128, C = 64
// (the paper's setting, two KV heads): the G heads fit one m16 tile, so the
// register kernel (AttentionInRegisters.cpp) takes it: four warps per
// four consecutive queries of a batch x KV head, one after the other,
// each warp attending its own list entries with S, P and O in registers
// and only V staged, in its own shared tile.
// (sparse-attention-staged.mlir has the kernel for G > 16.)

// CHECK-LABEL: func.func @attend
// The grid is (ceil(Nq / 4), B x Hkv) x 128 threads with four V tiles of
// 64 x 136 bf16 (17408 bytes each) and the list of 8 blocks: 69664 bytes.
// CHECK-DAG: %[[SMEM:.*]] = arith.constant 69664 : i32
// CHECK-DAG: %[[GX:.*]] = arith.ceildivui %{{.*}}, %c4 : index
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention blocks in (%[[GX]], %{{.*}}, %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %[[SMEM]]

// CHECK: gpu.func @sparse_attention
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-SAME: nvvm.minctasm = 2
// CHECK-DAG: %[[WARP:.*]] = arith.divui %{{.*}}, %c32 : index
// CHECK-DAG: %[[BYTES:.*]] = gpu.dynamic_shared_memory
// CHECK-DAG: %[[LIST:.*]] = memref.view %[[BYTES]][%c69632][] : {{.*}} to memref<8xi32, #gpu.address_space<workgroup>>
// CHECK-DAG: %[[VOFF:.*]] = arith.muli %[[WARP]], %c17408 : index
// CHECK-DAG: %[[VTILE:.*]] = memref.view %[[BYTES]][%[[VOFF]]][] : {{.*}} to memref<64x136xbf16, #gpu.address_space<workgroup>>
// The block's four queries in turn (those below Nq).
// CHECK: scf.for %{{.*}} = %c0 to %c4 step %c1 {
// CHECK: scf.if
// The attended blocks into the list (thread 0), then a barrier.
// CHECK: %[[WALK:.*]]:2 = scf.for %{{.*}} = %c0 to %c8 step %c1 iter_args
// CHECK: memref.store %{{.*}}, %[[LIST]][%{{.*}}]
// CHECK: gpu.barrier
// Warp w takes list entries w, w + 4, ...: its state is the max and sum
// of its two head rows and O's 16 n8 accumulators.
// CHECK: %[[LOOP:.*]]:20 = scf.for %[[J:.*]] = %[[WARP]] to %[[WALK]]#1 step %c4 iter_args({{.*}}) -> (f32, f32, f32, f32, vector<2x2xf32>,
// CHECK: memref.load %[[LIST]][%[[J]]]
// CHECK: nvvm.bar.warp.sync
// V's 64 rows copied asynchronously into the warp's tile, zero-filled past
// N, through L1 (the next queries attend many of the same blocks).
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
// The warps' partial results merged through shared memory: every warp is
// done with its V tile, writes, and the threads combine the four.
// CHECK: gpu.barrier
// CHECK: vector.store %{{.*}} : memref<4x2080xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK: gpu.barrier
// CHECK: math.exp2
// CHECK: arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK: vector.store %{{.*}} : memref<?x32x?x128xbf16>, vector<8xbf16>
// The next query's list and V tiles wait until this one's merge is read.
// CHECK: gpu.barrier
// CHECK: gpu.return
func.func @attend(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x2x?x128xbf16>,
                  %v: tensor<?x2x?x128xbf16>, %s: tensor<?x2x?x8xi32>, %off: index)
    -> (tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) {
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 64
      : tensor<?x32x?x128xbf16>, tensor<?x2x?x128xbf16>, tensor<?x2x?x128xbf16>,
        tensor<?x2x?x8xi32> -> tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>
  return %o, %l : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>
}
