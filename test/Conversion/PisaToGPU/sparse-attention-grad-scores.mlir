// RUN: pisa-opt %s --pisa-decompose-to-kernels=grad-dq-from-scores | FileCheck %s --enable-var-scope --check-prefix=KERNELS
// RUN: pisa-opt %s --pisa-decompose-to-kernels | FileCheck %s --enable-var-scope --check-prefix=DEFAULT
// RUN: pisa-opt %s --pisa-decompose-to-kernels=grad-dq-from-scores %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope
// RUN: pisa-opt %s --pisa-decompose-to-kernels=grad-dq-from-scores %bufferize --pisa-configure-kernels | FileCheck %s --enable-var-scope --check-prefix=CONFIG

// The backward with dq from the key kernel's dS tiles, at the paper's
// setting (G = 16, d = dv = 128, C = 64, K = 8, bf16): D's kernel op
// first, the key half with a scores destination [B, Hkv, Nq, K G C] (8 x
// 16 x 64 = 8192 bf16 a query), then dq from the tiles.

// KERNELS-LABEL: func.func @grad
// KERNELS: cf.assert %{{.+}}, "pisa.sparse_attention_grad: Nq K is above 2147483647 with dq from the dS tiles (the query lists' entries)"
// KERNELS-NEXT: %[[D:.+]] = pisa.kernel.sparse_attention_grad_delta %arg5, %arg7 outs(%{{.+}})
// KERNELS: %[[SCORES:.+]] = tensor.empty(%{{.+}}, %{{.+}}) : tensor<?x1x?x8192xbf16>
// KERNELS: %[[DK:.+]]:6 = pisa.kernel.sparse_attention_grad_keys %arg0, %arg1, %arg2, %arg3, %arg4, %arg6, %[[D]], %arg7 outs({{.+}} scores %[[SCORES]])
// KERNELS: %[[DQ:.+]] = pisa.kernel.sparse_attention_grad_queries_from_scores %arg0, %arg1, %arg3, %arg4, %[[DK]]#5 outs(%{{.+}}) block_size = 64 scale = 0.0883883461
// KERNELS: return %[[DQ]], %[[DK]]#0, %[[DK]]#1
// The register key kernel that stores dS tiles asks the L2 for step s +
// 2's rows, the dq kernel for the next block's tile (prefetch_ahead).
// CONFIG-LABEL: func.func @grad
// CONFIG: pisa.kernel.sparse_attention_grad_keys {{.+}}kernel_config = #pisa.kernel_config<variant = wgmma, threads = 128, epilogue = registers, min_blocks_per_sm = 2, prefetch_ahead = 2>
// CONFIG: pisa.kernel.sparse_attention_grad_queries_from_scores {{.+}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, prefetch_ahead = 1>
// CONFIG-LABEL: func.func @grad_wide
// CONFIG-NOT: prefetch_ahead
// Without the mark, the dq pass (which writes D) comes first.
// DEFAULT-LABEL: func.func @grad
// DEFAULT-NOT: sparse_attention_grad_delta
// DEFAULT: pisa.kernel.sparse_attention_grad_queries
// DEFAULT: pisa.kernel.sparse_attention_grad_keys

// D: a quad of lanes a head row, 32 rows a block of 128 threads, B in y.
// CHECK-LABEL: func.func @grad
// CHECK: %[[ROWS:.+]] = arith.muli %{{.+}}, %c16 : index
// CHECK: %[[DBLOCKS:.+]] = arith.ceildivui %[[ROWS]], %c32 : index
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention_grad_delta blocks in (%[[DBLOCKS]], %{{.+}}, %c1) threads in (%c128, %c1, %c1)
// The key kernel takes the scores; its shared memory is the paper key
// kernel's (101,440 bytes without them) and two more i32 arrays [64] per
// step buffer (each row's query and first column in the scores).
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention_grad_keys {{.+}} dynamic_shared_memory_size %c102464_i32 args({{.+}}, %{{.+}} : index, %{{.+}} : memref<?x1x?x8192xbf16>)
// The dq kernel: four warps a block (a query each); each warp's K tile
// (64 x 136 x 2 = 17,408 bytes), then the lists (4 x 32): 69,760 bytes.
// CHECK: %[[QUADS:.+]] = arith.ceildivui %{{.+}}, %c4 :
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention_grad_queries_from_scores blocks in (%[[QUADS]], %{{.+}}, %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c69760_i32

// CHECK-LABEL: gpu.func @sparse_attention_grad_delta
// CHECK: vector.load %{{.+}} : memref<?x16x?x128xbf16>, vector<32xbf16>
// CHECK: vector.reduction <add>
// CHECK: gpu.shuffle  xor
// CHECK: gpu.shuffle  xor
// CHECK: memref.store %{{.+}} : memref<?x16x?xf32>
// The list kernel: each (query, attended block) pair's entry is query K +
// the block's rank among the query's attended blocks.
// CHECK-LABEL: gpu.func @list_attending_queries
// CHECK: %[[QK:.+]] = arith.muli %{{.+}}, %c8 : index
// CHECK: %[[ENTRY:.+]] = arith.addi %[[QK]], %{{.+}} : index
// CHECK: %[[ENTRY32:.+]] = arith.index_cast %[[ENTRY]] : index to i32
// CHECK: memref.store %[[ENTRY32]], %{{.+}} : memref<?x1x?x8xi32>
// The key kernel (no selection operand): each step row's query (entry /
// 8) and tile row ((entry mod 8) 16 + head) from its list entry, then the
// dS^T fragments rounded to bf16 and stored at the row's query and tile
// row.
// CHECK-LABEL: gpu.func @sparse_attention_grad_keys
// CHECK-SAME: %{{.+}}: index, %{{.+}}: memref<?x1x?x8192xbf16>) kernel
// CHECK: %[[QENTRY:.+]] = memref.load %{{.+}} : memref<143xi32, #gpu.address_space<workgroup>>
// CHECK-NEXT: %[[QINDEX:.+]] = arith.index_cast %[[QENTRY]] : i32 to index
// CHECK-NEXT: arith.divui %[[QINDEX]], %c8 : index
// CHECK: memref.store %{{.+}}, %{{.+}}[%thread_id_x] : memref<64xi32, #gpu.address_space<workgroup>>
// CHECK-NEXT: %[[RENTRY:.+]] = memref.load %{{.+}} : memref<143xi32, #gpu.address_space<workgroup>>
// CHECK-NEXT: %[[RINDEX:.+]] = arith.index_cast %[[RENTRY]] : i32 to index
// CHECK-NEXT: %[[RANK:.+]] = arith.remui %[[RINDEX]], %c8 : index
// CHECK-NEXT: arith.muli %[[RANK]], %c16 : index
// Step s + 2's rows of Q and of dO (256 bytes each) asked of the L2 when
// step s + 1's copies are issued, a row a thread.
// CHECK: nvvm.cp.async.bulk.prefetch %{{.+}}, %c256_i32 : <1>
// CHECK: nvvm.cp.async.bulk.prefetch %{{.+}}, %c256_i32 : <1>
// CHECK: nvvm.cp.async.wait.group 3
// CHECK: arith.truncf %{{.+}} : f32 to bf16
// CHECK: memref.store %{{.+}} : memref<?x1x?x8192xbf16>
// The dq kernel: dS's A fragments as 4-byte pairs from the scores, K's
// rows copied into the warp's tile, dQ += dS K on mma.sync.
// CHECK-LABEL: gpu.func @sparse_attention_grad_queries_from_scores
// The next block's tile (16 x 64 bf16) asked of the L2 by lane 0.
// CHECK: nvvm.cp.async.bulk.prefetch %{{.+}}, %c2048_i32 : <1>
// CHECK: vector.load %{{.+}} : memref<?x1x?x8192xbf16>, vector<2xbf16>
// CHECK: nvgpu.device_async_wait
// CHECK: nvgpu.mma.sync
func.func @grad(%q: tensor<?x16x?x128xbf16>, %k: tensor<?x1x?x128xbf16>, %v: tensor<?x1x?x128xbf16>, %s: tensor<?x1x?x8xi32>, %off: index, %o: tensor<?x16x?x128xbf16>, %l: tensor<?x16x?xf32>, %do: tensor<?x16x?x128xbf16>) -> (tensor<?x16x?x128xf32>, tensor<?x1x?x128xf32>, tensor<?x1x?x128xf32>) {
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 64
    : tensor<?x16x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x8xi32>, tensor<?x16x?x128xbf16>, tensor<?x16x?xf32>, tensor<?x16x?x128xbf16> -> tensor<?x16x?x128xf32>, tensor<?x1x?x128xf32>, tensor<?x1x?x128xf32>
  return %dq, %dk, %dv : tensor<?x16x?x128xf32>, tensor<?x1x?x128xf32>, tensor<?x1x?x128xf32>
}

// Sizes the dq kernel does not take (d = 256): the dq pass, marked or not.
// KERNELS-LABEL: func.func @grad_wide
// KERNELS-NOT: scores
// KERNELS: pisa.kernel.sparse_attention_grad_queries
// KERNELS: pisa.kernel.sparse_attention_grad_keys
func.func @grad_wide(%q: tensor<?x4x?x256xbf16>, %k: tensor<?x1x?x256xbf16>, %v: tensor<?x1x?x256xbf16>, %s: tensor<?x1x?x8xi32>, %off: index, %o: tensor<?x4x?x256xbf16>, %l: tensor<?x4x?xf32>, %do: tensor<?x4x?x256xbf16>) -> (tensor<?x4x?x256xf32>, tensor<?x1x?x256xf32>, tensor<?x1x?x256xf32>) {
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 32
    : tensor<?x4x?x256xbf16>, tensor<?x1x?x256xbf16>, tensor<?x1x?x256xbf16>, tensor<?x1x?x8xi32>, tensor<?x4x?x256xbf16>, tensor<?x4x?xf32>, tensor<?x4x?x256xbf16> -> tensor<?x4x?x256xf32>, tensor<?x1x?x256xf32>, tensor<?x1x?x256xf32>
  return %dq, %dk, %dv : tensor<?x4x?x256xf32>, tensor<?x1x?x256xf32>, tensor<?x1x?x256xf32>
}
