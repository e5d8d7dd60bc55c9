// RUN: pisa-opt %s --split-input-file %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope

// Sparse attention on query tiles, asked for by kernel_config union_queries
// (QueryTileAttention.cpp): a block of W + 1 warps per W consecutive
// queries of a batch x KV head, warp w < W owning query w's 16 head rows;
// the block attends the union of its queries' blocks, each block's K and V
// copied once into shared memory by warp W, and each query warp runs S,
// the online softmax and O = O alpha + P V on the blocks its query attends
// as they land, synchronized per buffer by mbarriers, not block barriers.

// CHECK-LABEL: func.func @tiles4
// The grid is (ceil(Nq / 4), B x Hkv) x 160 threads; shared memory: two
// buffers of a block's K and V (4 x 17408 bytes), each warp's Q rows (4 x
// 4352), the warps' lists (4 x 8 entries), their counts, the union (32
// entries) and its masks and count: 87456 bytes. Five warps take one
// block an SM (two would put three warps on one of the SM's four
// register files: 168 registers a lane).
// CHECK-DAG: %[[GX:.*]] = arith.ceildivui %{{.*}}, %c4 : index
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention blocks in (%[[GX]], %{{.*}}, %c1) threads in (%c160, %c1, %c1) dynamic_shared_memory_size %c87456_i32
// CHECK: gpu.func @sparse_attention
// CHECK-SAME: known_block_size = array<i32: 160, 1, 1>
// CHECK-SAME: nvvm.minctasm = 1
// Thread 0 sets up each buffer's barriers: full (the copying warp's 32
// lanes arrive), empty (the 4 query warps' 128 lanes arrive).
// CHECK: %[[BARS:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c0], %c32
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c2], %c128
// Lane 0 of each query warp lists its query's blocks; the query's rows staged.
// CHECK: memref.store %{{.*}} : memref<4x8xi32, #gpu.address_space<workgroup>>
// CHECK: vector.store %{{.*}} : memref<16x136xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// CHECK: gpu.barrier
// Thread 0 merges the lists into the union with its masks.
// CHECK: scf.for %{{.*}} = %c0 to %c32 step %c1
// CHECK: memref.store %{{.*}} : memref<32xi32, #gpu.address_space<workgroup>>
// CHECK: memref.store %{{.*}} : memref<32xi32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// Warp 4: per entry, its buffer's last entry released, its K and V copied,
// and the buffer full once each lane's copies land.
// CHECK: scf.for
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]]
// CHECK: nvgpu.device_async_copy %{{.*}} : memref<?x2x?x128xbf16> to memref<64x136xbf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_create_group
// CHECK: nvvm.cp.async.wait.group 0
// CHECK-NEXT: nvgpu.mbarrier.arrive %[[BARS]]
// CHECK: } else {
// The query warps: every entry in order, no block barrier; each waits
// until the entry is full whether its query attends it or not.
// CHECK-NOT: gpu.barrier
// CHECK: %{{.*}}:20 = scf.for %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, vector<2x2xf32>,
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]]
// CHECK-NEXT: scf.if
// An entry the warp's query attends: S = Q K^T from the tiles: 8 n8 tiles
// x 8 k16 steps.
// CHECK-COUNT-64: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xbf16>, vector<2x2xbf16>, vector<2x2xf32>) -> vector<2x2xf32>
// The online softmax, in base 2; then O += P V with V by ldmatrix.trans.
// CHECK: gpu.shuffle xor
// CHECK: math.exp2
// CHECK: nvgpu.ldmatrix %{{.*}} {numTiles = 2 : i32, transpose = true} : memref<64x136xbf16, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
// CHECK: nvgpu.mma.sync
// Every entry released by every query warp.
// CHECK: nvgpu.mbarrier.arrive %[[BARS]]
// CHECK: scf.yield
// Each head row divided by its sum, with its lse.
// CHECK-NOT: gpu.barrier
// CHECK: vector.store %{{.*}} : memref<?x32x?x128xbf16>, vector<2xbf16>
// CHECK: memref.store %{{.*}} : memref<?x32x?xf32>
// CHECK: gpu.return
func.func @tiles4(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x2x?x128xbf16>,
                  %v: tensor<?x2x?x128xbf16>, %s: tensor<?x2x?x8xi32>, %off: index,
                  %o0: tensor<?x32x?x128xbf16>, %l0: tensor<?x32x?xf32>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) {
  %o, %l = pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o0, %l0) block_size = 64 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = mma_sync, union_queries = 4>}
      : tensor<?x32x?x128xbf16>, tensor<?x2x?x128xbf16>, tensor<?x2x?x128xbf16>, tensor<?x2x?x8xi32>,
        tensor<?x32x?x128xbf16>, tensor<?x32x?xf32> -> tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>
  return %o, %l : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>
}

// -----

// Seven queries a block (the most), G = 4, d = 64, dv = 32, C = 32, f16:
// 256 threads, one block an SM kept in registers; shared memory: 2 x
// (4608 + 2560) for K and V, 7 x 2304 for Q, 7 x 6 list entries and 7
// counts, 42 union entries and masks, the count (each rounded to 16
// bytes): 31040 bytes.
// CHECK-LABEL: func.func @tiles7
// CHECK: %[[GX:.*]] = arith.ceildivui %{{.*}}, %c7 : index
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention blocks in (%[[GX]], %{{.*}}, %c1) threads in (%c256, %c1, %c1) dynamic_shared_memory_size %c31040_i32
// CHECK: gpu.func @sparse_attention
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK-SAME: nvvm.minctasm = 1
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c2], %c224
// CHECK: memref.store %{{.*}} : memref<7x6xi32, #gpu.address_space<workgroup>>
// CHECK: scf.for %{{.*}} = %c0 to %c42 step %c1
// CHECK: %{{.*}}:8 = scf.for %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>)
// CHECK-COUNT-16: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// CHECK: math.exp2
// CHECK: nvgpu.ldmatrix %{{.*}} {numTiles = 2 : i32, transpose = true} : memref<32x40xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
// CHECK: gpu.return
func.func @tiles7(%q: tensor<?x4x?x64xf16>, %k: tensor<?x1x?x64xf16>,
                  %v: tensor<?x1x?x32xf16>, %s: tensor<?x1x?x6xi32>, %off: index,
                  %o0: tensor<?x4x?x32xf16>, %l0: tensor<?x4x?xf32>)
    -> (tensor<?x4x?x32xf16>, tensor<?x4x?xf32>) {
  %o, %l = pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o0, %l0) block_size = 32 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, union_queries = 7>}
      : tensor<?x4x?x64xf16>, tensor<?x1x?x64xf16>, tensor<?x1x?x32xf16>, tensor<?x1x?x6xi32>,
        tensor<?x4x?x32xf16>, tensor<?x4x?xf32> -> tensor<?x4x?x32xf16>, tensor<?x4x?xf32>
  return %o, %l : tensor<?x4x?x32xf16>, tensor<?x4x?xf32>
}

// -----

// The backward's dq pass takes union_queries too (3 by default): seven
// queries a block, the paper's shape: 256 threads (a warp a query and
// one that copies); shared memory: two K and V buffers (69632 bytes),
// seven warps' Q and dO rows (2 x 30464), the lists (224), counts (32),
// union and masks (2 x 224) and count (16): 131280 bytes, one block an SM
// kept in registers. full takes the copying warp's 32 arrivals, empty
// the query warps' 224.
// CHECK-LABEL: func.func @grad7
// CHECK-DAG: %[[GX:.*]] = arith.ceildivui %{{.*}}, %c7 : index
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention_grad_queries blocks in (%[[GX]], %{{.*}}, %c1) threads in (%c256, %c1, %c1) dynamic_shared_memory_size %c131280_i32
// CHECK: gpu.func @sparse_attention_grad_queries
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK-SAME: nvvm.minctasm = 1
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c0], %c32
// CHECK: nvgpu.mbarrier.init %{{.*}}[%c2], %c224
// CHECK: memref.store %{{.*}} : memref<7x8xi32, #gpu.address_space<workgroup>>
// CHECK: scf.for %{{.*}} = %c0 to %c56 step %c1
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: gpu.return
func.func @grad7(%q: tensor<?x16x?x128xbf16>, %k: tensor<?x1x?x128xbf16>, %v: tensor<?x1x?x128xbf16>,
                 %s: tensor<?x1x?x8xi32>, %off: index, %o: tensor<?x16x?x128xbf16>, %l: tensor<?x16x?xf32>,
                 %do: tensor<?x16x?x128xbf16>, %dq0: tensor<?x16x?x128xf32>, %dd0: tensor<?x16x?xf32>)
    -> (tensor<?x16x?x128xf32>, tensor<?x16x?xf32>) {
  %dq, %dd = pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %s, %off, %o, %l, %do outs(%dq0, %dd0)
      block_size = 64 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = mma_sync, union_queries = 7>}
      : tensor<?x16x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x8xi32>,
        tensor<?x16x?x128xbf16>, tensor<?x16x?xf32>, tensor<?x16x?x128xbf16>, tensor<?x16x?x128xf32>,
        tensor<?x16x?xf32> -> tensor<?x16x?x128xf32>, tensor<?x16x?xf32>
  return %dq, %dd : tensor<?x16x?x128xf32>, tensor<?x16x?xf32>
}

// -----

// The dq pass on tiles of 4 queries with C = 16, dv = 32: warp 4's lanes
// copy an entry, 4 of the keys' 128 chunks and 2 of the values' 64 each
// (a tile of 16-byte chunks over C rows and a multiple of 16 columns is a
// multiple of 32 chunks: no lane is left without one and none needs a
// guard), then wait for their copies before arriving on the buffer's
// full.
// CHECK-LABEL: func.func @grad4c16
// CHECK: gpu.func @sparse_attention_grad_queries
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK-COUNT-4: nvgpu.device_async_copy %{{.*}} : memref<?x1x?x64xf16> to memref<16x72xf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: nvgpu.device_async_create_group
// CHECK-NOT: scf.if
// CHECK-COUNT-2: nvgpu.device_async_copy %{{.*}} : memref<?x1x?x32xf16> to memref<16x40xf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: nvgpu.device_async_create_group
// CHECK-NEXT: nvvm.cp.async.wait.group 0
// CHECK-NEXT: nvgpu.mbarrier.arrive
func.func @grad4c16(%q: tensor<?x4x?x64xf16>, %k: tensor<?x1x?x64xf16>, %v: tensor<?x1x?x32xf16>,
                 %s: tensor<?x1x?x8xi32>, %off: index, %o: tensor<?x4x?x32xf16>, %l: tensor<?x4x?xf32>,
                 %do: tensor<?x4x?x32xf16>, %dq0: tensor<?x4x?x64xf32>, %dd0: tensor<?x4x?xf32>)
    -> (tensor<?x4x?x64xf32>, tensor<?x4x?xf32>) {
  %dq, %dd = pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %s, %off, %o, %l, %do outs(%dq0, %dd0)
      block_size = 16 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, union_queries = 4>}
      : tensor<?x4x?x64xf16>, tensor<?x1x?x64xf16>, tensor<?x1x?x32xf16>, tensor<?x1x?x8xi32>,
        tensor<?x4x?x32xf16>, tensor<?x4x?xf32>, tensor<?x4x?x32xf16>, tensor<?x4x?x64xf32>,
        tensor<?x4x?xf32> -> tensor<?x4x?x64xf32>, tensor<?x4x?xf32>
  return %dq, %dd : tensor<?x4x?x64xf32>, tensor<?x4x?xf32>
}
