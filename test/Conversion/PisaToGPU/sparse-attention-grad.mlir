// RUN: pisa-opt %s --pisa-decompose-to-kernels | FileCheck %s --enable-var-scope --check-prefix=KERNELS
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope --check-prefix=STAGED
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels=chip=sm_90 --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope --check-prefix=MMA
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels=attention-union-queries=3 --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope --check-prefix=TILES

// The backward of sparse attention at the paper's setting (G = 16, d = dv
// = 128, C = 64, K = 8, bf16), B, N and Nq dynamic: the query kernel op
// (dq and D) then the key kernel op (dk and dv), which reads D and keeps
// its query index [B, Hkv, ceil(N / 64), Q + 4] (Q = min(256, ceil(Nq /
// 32)), at least 1), its query lists [B, Hkv, Nq, K] and the f32 sums of
// its segments [B, Hkv, N, d + dv] as scratch: linear in N and Nq.

// KERNELS-LABEL: func.func @grad
// N below 2^31 (checked before a call) keeps the index's block rows in
// i32.
// KERNELS: cf.assert %{{.+}}, "pisa.sparse_attention_grad: Nq is above the GPU limit of 2147483647 (grid x)"
// KERNELS: cf.assert %{{.+}}, "pisa.sparse_attention_grad: N is above the GPU limit of 2147483647 (the query index's rows)"
// KERNELS: %[[BLOCKS:.+]] = arith.ceildivui %{{.+}}, %c64
// KERNELS: %[[CHUNKS:.+]] = arith.ceildivui %{{.+}}, %c32
// KERNELS: %[[CAPPED:.+]] = arith.minui %[[CHUNKS]], %c256
// KERNELS: %[[Q:.+]] = arith.maxui %[[CAPPED]], %c1
// KERNELS: %[[COLUMNS:.+]] = arith.addi %[[Q]], %c4
// KERNELS: %[[INDEX:.+]] = tensor.empty(%{{.+}}, %[[BLOCKS]], %[[COLUMNS]]) : tensor<?x1x?x?xi32>
// KERNELS: %[[LISTS:.+]] = tensor.empty(%{{.+}}, %{{.+}}) : tensor<?x1x?x8xi32>
// KERNELS: %[[SUMS:.+]] = tensor.empty(%{{.+}}, %{{.+}}) : tensor<?x1x?x256xf32>
// KERNELS: %[[DQ:.+]]:2 = pisa.kernel.sparse_attention_grad_queries %arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7 outs({{.+}}) block_size = 64 scale = 0.0883883461
// KERNELS: %[[DK:.+]]:5 = pisa.kernel.sparse_attention_grad_keys %arg0, %arg1, %arg2, %arg3, %arg4, %arg6, %[[DQ]]#1, %arg7 outs({{.+}}, {{.+}}, %[[INDEX]], %[[LISTS]], %[[SUMS]])
// KERNELS: return %[[DQ]]#0, %[[DK]]#0, %[[DK]]#1

// CHECK-LABEL: func.func @grad
// The host checks what the verifier could not (dynamic sizes).
// CHECK: cf.assert %{{.+}}, "pisa.sparse_attention_grad: dO's Nq differs from the queries'"
// CHECK: cf.assert %{{.+}}, "pisa.sparse_attention_grad: the lse's Nq differs from the queries'"
// The register dq kernel: one block of four warps per four consecutive
// queries (a warp each) and B x Hkv; its shared memory: each warp's K
// tile (64 x 136 x 2 = 17408 bytes) and Q rows (16 x 136 x 2 = 4352),
// then each warp's block list (32): 87168 bytes.
// CHECK: %[[QUADS:.+]] = arith.ceildivui %{{.+}}, %c4 :
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention_grad_queries blocks in (%[[QUADS]], %[[GROUPS:.+]], %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c87168_i32
// On query tiles (attention-union-queries=3): one block of 128 threads
// per three consecutive queries (a warp each, and one that copies); its
// shared memory: two buffers of a block's K and V (69632 bytes), each
// warp's Q and dO rows (2 x 13056), the warps' block lists (96), their
// counts (16), the union (96), its masks (96) and count (16): 96064
// bytes.
// TILES: %[[TILES:.+]] = arith.ceildivui %{{.+}}, %c3 :
// TILES: gpu.launch_func @pisa_kernels::@sparse_attention_grad_queries blocks in (%[[TILES]], %{{.+}}, %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c96064_i32
// At most ceil(Nq / 256) segments (at least one): per key block 2048 /
// (key blocks x B x Hkv) at most, and never more than 16; at most 64 for
// key block 0 (every query of a PISA selection attends it).
// CHECK: %[[GRID:.+]] = arith.muli %[[KEYBLOCKS0:.+]], %[[B:.+]] : index
// CHECK: %[[SOME:.+]] = arith.maxui %[[GRID]], %c1
// CHECK: %[[SHARE:.+]] = arith.ceildivui %c2048, %[[SOME]]
// CHECK: %[[MOST:.+]] = arith.minui %[[SHARE]], %c16
// CHECK: %[[PARTS:.+]] = arith.ceildivui %{{.+}}, %c256
// CHECK: %[[CAP:.+]] = arith.minui %[[PARTS]], %[[MOST]]
// CHECK: %[[SEGS:.+]] = arith.maxui %[[CAP]], %c1
// CHECK: %[[CAP0:.+]] = arith.minui %[[PARTS]], %c64
// CHECK: %[[SEGS0:.+]] = arith.maxui %[[CAP0]], %c1
// The query lists: the index is zeroed, one thread per query counts the
// blocks it attends by chunk, a warp per row scans its counts, a block
// of 1024 per B x Hkv the rows' lengths, and a warp per chunk lists its
// queries.
// CHECK: gpu.launch_func @pisa_kernels::@zero_query_index
// CHECK: gpu.launch_func @pisa_kernels::@count_attending_queries
// CHECK: gpu.launch_func @pisa_kernels::@scan_query_index_rows {{.+}} threads in (%c128, %c1, %c1)
// CHECK: gpu.launch_func @pisa_kernels::@scan_query_index_starts blocks in (%c1, %{{.+}}, %c1) threads in (%c1024, %c1, %c1)
// CHECK: gpu.launch_func @pisa_kernels::@list_attending_queries {{.+}} threads in (%c32, %c1, %c1)
// One block per (key block x segment, B x Hkv); its shared memory: K, V,
// two steps' Q and dO (64 rows: 4 queries of 16 heads) and each step
// row's lse, D and visible keys, and the list of the segment's queries
// (the dK and dV sums are written over the 16-bit tiles at the end). On
// sm_90a the tiles are in the 128-byte swizzle at 1024-byte boundaries
// (wgmma reads them): 101440 bytes with the alignment's slack; with rows
// padded for ldmatrix (mma.sync, sm_90) 106576. (Key blocks - 1) x S + S0
// blocks, none without a key block.
// CHECK: %[[NONE:.+]] = arith.cmpi eq, %[[KEYBLOCKS:.+]], %c0
// CHECK: %[[LESS:.+]] = arith.subi %[[KEYBLOCKS]], %c1
// CHECK: %[[REST:.+]] = arith.muli %[[LESS]], %[[SEGS]]
// CHECK: %[[ALL:.+]] = arith.addi %[[REST]], %[[SEGS0]]
// CHECK: %[[GRIDX:.+]] = arith.select %[[NONE]], %c0, %[[ALL]]
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention_grad_keys blocks in (%[[GRIDX]], %[[GROUPS]], %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c101440_i32
// MMA: gpu.launch_func @pisa_kernels::@sparse_attention_grad_keys blocks in ({{.+}}) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c106576_i32

// The register dq kernel: each warp lists its query's blocks, stages its
// Q rows and loads dO's A fragments once, writes D, and for each block it
// attends copies the block's keys into its own tile by cp.async while it
// computes dP = dO V^T from V's rows in global memory, then S = Q K^T
// from its tiles by ldmatrix, P and dS in registers, and dQ += dS K (K by
// ldmatrix.trans) into sums the loop carries; no block barrier.
// CHECK-LABEL: gpu.func @sparse_attention_grad_queries(
// CHECK-NOT: gpu.barrier
// CHECK-NOT: nvgpu.mbarrier.create
// CHECK: memref.store {{.+}} : memref<?x16x?xf32>
// CHECK: scf.for {{.+}} iter_args
// CHECK: nvvm.bar.warp.sync
// CHECK: nvgpu.device_async_copy %arg1
// CHECK: nvgpu.device_async_create_group
// CHECK: vector.load %arg2
// CHECK: nvgpu.mma.sync
// CHECK: nvgpu.device_async_wait
// CHECK-NEXT: nvvm.bar.warp.sync
// CHECK: nvgpu.ldmatrix {{.+}} {numTiles = 4 : i32, transpose = false} : memref<16x136xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: math.exp2
// CHECK: nvgpu.ldmatrix {{.+}} {numTiles = 2 : i32, transpose = true} : memref<64x136xbf16, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
// CHECK: nvgpu.mma.sync
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return

// The query-tile kernel: thread 0 merges the warps' block lists; warp 3
// copies each union entry's K and V by cp.async into one of two buffers
// once the query warps have released the buffer (mbarriers full and
// empty per buffer, no block barrier an entry), and each query warp waits
// for every entry and, where its query attends it, computes S = Q K^T and
// dP = dO V^T (ldmatrix A and B fragments), P and dS in registers, and
// dQ += dS K (K by ldmatrix.trans) into sums the loop carries.
// TILES-LABEL: gpu.func @sparse_attention_grad_queries(
// TILES: %[[BARS:.+]] = nvgpu.mbarrier.create
// TILES: gpu.barrier
// TILES: gpu.barrier
// TILES: scf.for
// TILES: nvgpu.mbarrier.try_wait.parity %[[BARS]]
// TILES: nvgpu.device_async_copy
// TILES: nvgpu.device_async_create_group
// TILES: nvvm.cp.async.wait.group 0
// TILES-NEXT: nvgpu.mbarrier.arrive %[[BARS]]
// TILES: } else {
// TILES-NOT: gpu.barrier
// TILES: scf.for {{.+}} iter_args
// TILES: nvgpu.mbarrier.try_wait.parity %[[BARS]]
// TILES: nvgpu.ldmatrix {{.+}} {numTiles = 4 : i32, transpose = false} : memref<16x136xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// TILES: nvgpu.mma.sync
// TILES: math.exp2
// TILES: nvgpu.ldmatrix {{.+}} {numTiles = 2 : i32, transpose = true} : memref<64x136xbf16, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
// TILES: nvgpu.mma.sync
// TILES-NOT: vector.contract
// TILES: nvgpu.mbarrier.arrive %[[BARS]]
// TILES-NOT: gpu.barrier
// TILES: gpu.return

// The lanes of a warp that count at one (row, chunk) word (match.sync on
// the row and chunk as one i64) add their number there once, by the
// lowest of them.
// CHECK-LABEL: gpu.func @count_attending_queries
// CHECK: %[[PEERS:.+]] = nvvm.match.sync  any %{{.+}}, %{{.+}} : i64 -> i32
// CHECK: %[[N:.+]] = math.ctpop %[[PEERS]] : i32
// CHECK: memref.atomic_rmw addi %[[N]]
// The lanes that attend one block take consecutive places in lane order
// (match.sync, the lanes before in the match), the first of them moves
// the block's offset on.
// CHECK-LABEL: gpu.func @list_attending_queries
// CHECK: nvvm.match.sync  any
// CHECK: math.cttz
// CHECK: gpu.shuffle  idx
// CHECK: math.ctpop
// CHECK: nvvm.bar.warp.sync

// The register key kernel: the block's threads copy a window of its
// segment's run of the query lists (a thread an entry) into its list in
// shared memory; once the list holds four steps (four queries each) they run as
// a batch: step s + 1's Q and dO rows, lse and D are copied by cp.async
// into the other buffer (three groups) while step s computes, after
// waiting for all but those three groups. On sm_90a a step is the
// warpgroup's: the K and V tiles and the step's rows in the 128-byte
// swizzle, fenced for the tensor cores before the barrier; S^T = K Q^T as
// m64n64k16 wgmma steps from shared memory, P^T in registers, dV += P^T
// dO as m64n128k16 with P^T as the register A operand (inline PTX: the
// NVVM op takes A from shared memory only) and dO read MN-major, then
// dP^T = V dO^T, dS^T and dK += dS^T Q the same way, into sums carried by
// the step loop; then the segments add their sums in order: each waits
// for the block's counter to reach its index (an atomic read) and counts
// itself done after a device-scope fence.
// CHECK-LABEL: gpu.func @sparse_attention_grad_keys
// CHECK: memref.view {{.+}} to memref<2x64x8x8xbf16, #gpu.address_space<workgroup>>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: scf.for {{.+}} iter_args
// CHECK: memref.load %arg8
// CHECK: arith.cmpi uge, %{{.+}}, %c16
// CHECK: nvgpu.device_async_copy
// CHECK: nvgpu.device_async_create_group
// CHECK: scf.for {{.+}} iter_args
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.wait.group 3
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-8: nvvm.wgmma.mma_async {{.+}} <m = 64, n = 64, k = 16>, D[<f32>, {{.+}}], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: math.exp2
// CHECK: llvm.inline_asm has_side_effects {{.+}}wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.wgmma.mma_async {{.+}} <m = 64, n = 64, k = 16>
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: llvm.inline_asm has_side_effects {{.+}}wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT: nvgpu.ldmatrix
// CHECK-NOT: nvgpu.mma.sync
// CHECK: scf.while
// CHECK: memref.atomic_rmw addi
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: memref.atomic_rmw assign

// On sm_90 (no wgmma) per chunk of 16 rows each warp computes S^T = K Q^T
// and dP^T = V dO^T for its 16 keys (K's A fragments by ldmatrix, Q's B
// fragments by ldmatrix), P^T and dS^T in registers, and dK += dS^T Q,
// dV += P^T dO with Q and dO by ldmatrix.trans.
// The register key kernel: the block's threads copy a window of its
// segment's run of the query lists (a thread an entry) into its list in
// shared memory; once the list holds four steps (four queries each) they run as
// a batch: step s + 1's Q and dO rows, lse and D are copied by cp.async
// into the other buffer (three groups) while step s computes, after
// waiting for all but those three groups; per chunk of 16 rows each warp computes S^T
// = K Q^T and dP^T = V dO^T for its 16 keys (K's A fragments by ldmatrix,
// Q's B fragments by ldmatrix), P^T and dS^T in registers, and dK += dS^T
// Q, dV += P^T dO with Q and dO by ldmatrix.trans into sums carried by the
// step loop; then the segments add their sums in order: each waits for
// the block's counter to reach its index (an atomic read) and counts
// itself done after a device-scope fence.
// MMA-LABEL: gpu.func @sparse_attention_grad_keys
// MMA: scf.for {{.+}} iter_args
// MMA: memref.load %arg8
// MMA: arith.cmpi uge, %{{.+}}, %c16
// MMA: nvgpu.device_async_copy
// MMA: nvgpu.device_async_create_group
// MMA: scf.for {{.+}} iter_args
// MMA: nvgpu.device_async_copy
// MMA: nvvm.cp.async.wait.group 3
// MMA: nvvm.cp.async.wait.group 0
// MMA: gpu.barrier
// MMA: nvgpu.ldmatrix {{.+}} {numTiles = 4 : i32, transpose = false} : memref<64x136xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// MMA: nvgpu.ldmatrix {{.+}} {numTiles = 2 : i32, transpose = false} : memref<64x136xbf16, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
// MMA: nvgpu.mma.sync
// MMA: math.exp2
// MMA: nvgpu.ldmatrix {{.+}} {numTiles = 2 : i32, transpose = true} : memref<64x136xbf16, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
// MMA: nvgpu.mma.sync
// MMA-NOT: vector.contract
// MMA: scf.while
// MMA: memref.atomic_rmw addi
// MMA: nvvm.memory.barrier <gpu>
// MMA: nvvm.memory.barrier <gpu>
// MMA: memref.atomic_rmw assign

func.func @grad(%q: tensor<?x16x?x128xbf16>, %k: tensor<?x1x?x128xbf16>, %v: tensor<?x1x?x128xbf16>, %s: tensor<?x1x?x8xi32>, %off: index, %o: tensor<?x16x?x128xbf16>, %l: tensor<?x16x?xf32>, %do: tensor<?x16x?x128xbf16>) -> (tensor<?x16x?x128xf32>, tensor<?x1x?x128xf32>, tensor<?x1x?x128xf32>) {
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 64
    : tensor<?x16x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x8xi32>, tensor<?x16x?x128xbf16>, tensor<?x16x?xf32>, tensor<?x16x?x128xbf16> -> tensor<?x16x?x128xf32>, tensor<?x1x?x128xf32>, tensor<?x1x?x128xf32>
  return %dq, %dk, %dv : tensor<?x16x?x128xf32>, tensor<?x1x?x128xf32>, tensor<?x1x?x128xf32>
}

// d > 128 and d + dv > 256: the staged query kernel, one query a block
// (its dQ does not fit a lane's registers: S, dP, dS and dQ through shared
// memory) and the staged key kernel (its sums do not fit either: S and dP
// through shared memory and dV += P^T dO, dK += dS^T Q accumulated there,
// 32 columns of 64 step rows a warp at a time).
// STAGED-LABEL: func.func @grad_staged
// STAGED: gpu.launch_func @pisa_kernels::@sparse_attention_grad_queries_0 blocks in (%{{.+}}) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c73248_i32
// STAGED: gpu.launch_func @pisa_kernels::@sparse_attention_grad_keys_0 {{.+}} dynamic_shared_memory_size %c196176_i32
// STAGED-LABEL: gpu.func @sparse_attention_grad_queries_0
// STAGED: vector.contract {{.+}} : vector<16x256xbf16>, vector<8x256xbf16> into vector<16x8xf32>
// STAGED-NOT: nvgpu.mma.sync
// STAGED-LABEL: gpu.func @sparse_attention_grad_keys_0
// STAGED: memref.load %arg8
// STAGED: vector.contract {{.+}} : vector<64x256xbf16>, vector<8x256xbf16> into vector<64x8xf32>
// STAGED: vector.contract {{.+}} : vector<32x64xbf16>, vector<64x64xbf16> into vector<32x64xf32>
// STAGED-NOT: nvgpu.mma.sync
// STAGED: memref.atomic_rmw assign
func.func @grad_staged(%q: tensor<?x4x?x256xbf16>, %k: tensor<?x1x?x256xbf16>, %v: tensor<?x1x?x256xbf16>, %s: tensor<?x1x?x8xi32>, %off: index, %o: tensor<?x4x?x256xbf16>, %l: tensor<?x4x?xf32>, %do: tensor<?x4x?x256xbf16>) -> (tensor<?x4x?x256xf32>, tensor<?x1x?x256xf32>, tensor<?x1x?x256xf32>) {
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 32
    : tensor<?x4x?x256xbf16>, tensor<?x1x?x256xbf16>, tensor<?x1x?x256xbf16>, tensor<?x1x?x8xi32>, tensor<?x4x?x256xbf16>, tensor<?x4x?xf32>, tensor<?x4x?x256xbf16> -> tensor<?x4x?x256xf32>, tensor<?x1x?x256xf32>, tensor<?x1x?x256xf32>
  return %dq, %dk, %dv : tensor<?x4x?x256xf32>, tensor<?x1x?x256xf32>, tensor<?x1x?x256xf32>
}
