// RUN: pisa-opt %s --split-input-file --pisa-configure-kernels | FileCheck %s --enable-var-scope
// RUN: pisa-opt %s --split-input-file --pisa-configure-kernels=chip=sm_90 | FileCheck %s --enable-var-scope --check-prefix=SM90
// RUN: pisa-opt %s --split-input-file %bufferize --pisa-configure-kernels --convert-pisa-to-gpu | FileCheck %s --enable-var-scope --check-prefix=GPU

// --pisa-configure-kernels writes each kernel-level op's decisions; a
// configuration written by hand is kept and completed, and
// --convert-pisa-to-gpu builds the kernel it names.

// The paper's stage-2 tiles (Q_tile 4 x G 16 = 64 rows, bf16, d 128, C 64):
// wgmma on sm_90a, mma.sync (two warps of 32 rows, register epilogue) on
// sm_90.
// CHECK-LABEL: func.func @tiles
// CHECK: pisa.kernel.score_tiles {{.*}}kernel_config = #pisa.kernel_config<variant = wgmma, threads = 128, tiles_per_block = 8, min_blocks_per_sm = 6>
// SM90-LABEL: func.func @tiles
// SM90: pisa.kernel.score_tiles {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 64, rows_per_warp = 32, tiles_per_block = 8, epilogue = registers, min_blocks_per_sm = 6>
// GPU-LABEL: gpu.func @select_stage2_score_tiles_wgmma
// GPU-SAME: known_block_size = array<i32: 128, 1, 1>
// GPU-SAME: nvvm.minctasm = 6 : i32
func.func @tiles(%q: tensor<1x16x512x128xbf16>, %k: tensor<1x1x512x128xbf16>, %off: index,
                 %lc: tensor<1x1x8xi32>, %ls: tensor<1x1x8xi32>, %tl: tensor<1x1x2056xi32>,
                 %tf: tensor<1x1x2056xi32>, %nt: tensor<1x1xi32>, %sp: tensor<1x1x8192xi32>,
                 %out: tensor<1x1x512x16xf32>) -> tensor<1x1x512x16xf32> {
  %s = pisa.kernel.score_tiles %q, %k, %off, %lc, %ls, %tl, %tf, %nt, %sp outs(%out)
      topk = 8 block_size = 64 q_tile = 4 scale = 0.0883883461
      : tensor<1x16x512x128xbf16>, tensor<1x1x512x128xbf16>, tensor<1x1x8xi32>, tensor<1x1x8xi32>,
        tensor<1x1x2056xi32>, tensor<1x1x2056xi32>, tensor<1x1xi32>, tensor<1x1x8192xi32>,
        tensor<1x1x512x16xf32> -> tensor<1x1x512x16xf32>
  return %s : tensor<1x1x512x16xf32>
}

// -----

// The same tiles with mma.sync asked for, at 16 rows per warp through the
// shared-memory epilogue, on any chip: four warps, a score tile and a row
// LSE buffer in shared memory.
// CHECK-LABEL: func.func @mma_by_hand
// CHECK: kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, rows_per_warp = 16, tiles_per_block = 2, epilogue = shared, min_blocks_per_sm = 6>
// SM90-LABEL: func.func @mma_by_hand
// SM90: kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, rows_per_warp = 16, tiles_per_block = 2, epilogue = shared, min_blocks_per_sm = 6>
// GPU-LABEL: gpu.func @select_stage2_score_tiles_mma
// GPU-SAME: %{{.*}} : memref<64xf32, #gpu.address_space<workgroup>>
// GPU-SAME: known_block_size = array<i32: 128, 1, 1>
// GPU-SAME: nvvm.minctasm = 6 : i32
func.func @mma_by_hand(%q: tensor<1x16x512x128xbf16>, %k: tensor<1x1x512x128xbf16>, %off: index,
                       %lc: tensor<1x1x8xi32>, %ls: tensor<1x1x8xi32>, %tl: tensor<1x1x2056xi32>,
                       %tf: tensor<1x1x2056xi32>, %nt: tensor<1x1xi32>, %sp: tensor<1x1x8192xi32>,
                       %out: tensor<1x1x512x16xf32>) -> tensor<1x1x512x16xf32> {
  %s = pisa.kernel.score_tiles %q, %k, %off, %lc, %ls, %tl, %tf, %nt, %sp outs(%out)
      topk = 8 block_size = 64 q_tile = 4 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = mma_sync, rows_per_warp = 16, epilogue = shared, tiles_per_block = 2>}
      : tensor<1x16x512x128xbf16>, tensor<1x1x512x128xbf16>, tensor<1x1x8xi32>, tensor<1x1x8xi32>,
        tensor<1x1x2056xi32>, tensor<1x1x2056xi32>, tensor<1x1xi32>, tensor<1x1x8192xi32>,
        tensor<1x1x512x16xf32> -> tensor<1x1x512x16xf32>
  return %s : tensor<1x1x512x16xf32>
}

// -----

// SIMT asked for where tensor cores apply: a thread per row (64), one tile
// per block, no occupancy hint unless asked.
// CHECK-LABEL: func.func @simt_by_hand
// CHECK: kernel_config = #pisa.kernel_config<variant = simt, threads = 64, tiles_per_block = 1, min_blocks_per_sm = 3>
// GPU-LABEL: gpu.func @select_stage2_score_tiles(
// GPU-SAME: known_block_size = array<i32: 64, 1, 1>
// GPU-SAME: nvvm.minctasm = 3 : i32
func.func @simt_by_hand(%q: tensor<1x16x512x128xbf16>, %k: tensor<1x1x512x128xbf16>, %off: index,
                        %lc: tensor<1x1x8xi32>, %ls: tensor<1x1x8xi32>, %tl: tensor<1x1x2056xi32>,
                        %tf: tensor<1x1x2056xi32>, %nt: tensor<1x1xi32>, %sp: tensor<1x1x8192xi32>,
                        %out: tensor<1x1x512x16xf32>) -> tensor<1x1x512x16xf32> {
  %s = pisa.kernel.score_tiles %q, %k, %off, %lc, %ls, %tl, %tf, %nt, %sp outs(%out)
      topk = 8 block_size = 64 q_tile = 4 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = simt, min_blocks_per_sm = 3>}
      : tensor<1x16x512x128xbf16>, tensor<1x1x512x128xbf16>, tensor<1x1x8xi32>, tensor<1x1x8xi32>,
        tensor<1x1x2056xi32>, tensor<1x1x2056xi32>, tensor<1x1xi32>, tensor<1x1x8192xi32>,
        tensor<1x1x512x16xf32> -> tensor<1x1x512x16xf32>
  return %s : tensor<1x1x512x16xf32>
}

// -----

// Decode (one query): a block of 16 warps, a candidate per lane (g * K =
// 16), leaves and levels on tensor cores (bf16, G 16, d 128, fanout 2).
// CHECK-LABEL: func.func @decode
// CHECK: pisa.kernel.select_single_stage {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 512, warps_per_query = 16, walk = lanes, level_variant = mma_sync, min_blocks_per_sm = 1>
// GPU-LABEL: gpu.func @select_single_stage(
// GPU-SAME: known_block_size = array<i32: 512, 1, 1>
func.func @decode(%q: tensor<1x16x1x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                  %p: tensor<1x1x127x128xf32>, %off: index,
                  %out: tensor<1x1x1x8xi32>) -> tensor<1x1x1x8xi32> {
  %s = pisa.kernel.select_single_stage %q, %k, %p, %off outs(%out)
      topk = 8 block_size = 64 branching = 2 scale = 0.0883883461
      : tensor<1x16x1x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>,
        tensor<1x1x1x8xi32> -> tensor<1x1x1x8xi32>
  return %s : tensor<1x1x1x8xi32>
}

// -----

// The same decode asked to walk with ranks: the leaves then score on SIMT
// lanes and no level scorer applies.
// CHECK-LABEL: func.func @decode_ranks
// CHECK: kernel_config = #pisa.kernel_config<variant = simt, threads = 512, warps_per_query = 16, walk = ranks, min_blocks_per_sm = 1>
// GPU-LABEL: gpu.func @select_single_stage(
// GPU-SAME: known_block_size = array<i32: 512, 1, 1>
func.func @decode_ranks(%q: tensor<1x16x1x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                        %p: tensor<1x1x127x128xf32>, %off: index,
                        %out: tensor<1x1x1x8xi32>) -> tensor<1x1x1x8xi32> {
  %s = pisa.kernel.select_single_stage %q, %k, %p, %off outs(%out)
      topk = 8 block_size = 64 branching = 2 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = simt, walk = ranks>}
      : tensor<1x16x1x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>,
        tensor<1x1x1x8xi32> -> tensor<1x1x1x8xi32>
  return %s : tensor<1x1x1x8xi32>
}

// -----

// One warp per query asked for a decode: four queries' warps per block.
// CHECK-LABEL: func.func @decode_one_warp
// CHECK: kernel_config = #pisa.kernel_config<variant = simt, threads = 128, warps_per_query = 1>
// GPU-LABEL: gpu.func @select_single_stage(
// GPU-NOT: known_block_size
// GPU: gpu.return
func.func @decode_one_warp(%q: tensor<1x16x1x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                           %p: tensor<1x1x127x128xf32>, %off: index,
                           %out: tensor<1x1x1x8xi32>) -> tensor<1x1x1x8xi32> {
  %s = pisa.kernel.select_single_stage %q, %k, %p, %off outs(%out)
      topk = 8 block_size = 64 branching = 2 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = simt, warps_per_query = 1>}
      : tensor<1x16x1x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>,
        tensor<1x1x1x8xi32> -> tensor<1x1x1x8xi32>
  return %s : tensor<1x1x1x8xi32>
}

// -----

// Sparse attention: the register kernel where G <= 16 and d, dv <= 128
// (at most 2 blocks per SM), the staged one when asked.
// CHECK-LABEL: func.func @attention
// CHECK: pisa.kernel.sparse_attention {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 2>
// CHECK: pisa.kernel.sparse_attention {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = shared, min_blocks_per_sm = 4>
// GPU: gpu.func @sparse_attention(
// GPU-SAME: known_block_size = array<i32: 128, 1, 1>, nvvm.minctasm = 2 : i32
// GPU: gpu.func @sparse_attention_0(
// GPU-SAME: known_block_size = array<i32: 128, 1, 1>, nvvm.minctasm = 4 : i32
func.func @attention(%q: tensor<1x16x256x128xbf16>, %k: tensor<1x1x256x128xbf16>,
                     %v: tensor<1x1x256x128xbf16>, %s: tensor<1x1x256x8xi32>, %off: index,
                     %o: tensor<1x16x256x128xbf16>, %lse: tensor<1x16x256xf32>)
    -> (tensor<1x16x256x128xbf16>, tensor<1x16x256x128xbf16>) {
  %a:2 = pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %lse) block_size = 64 scale = 0.0883883461
      : tensor<1x16x256x128xbf16>, tensor<1x1x256x128xbf16>, tensor<1x1x256x128xbf16>, tensor<1x1x256x8xi32>,
        tensor<1x16x256x128xbf16>, tensor<1x16x256xf32> -> tensor<1x16x256x128xbf16>, tensor<1x16x256xf32>
  %b:2 = pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %lse) block_size = 64 scale = 0.0883883461
      {kernel_config = #pisa.kernel_config<variant = mma_sync, epilogue = shared>}
      : tensor<1x16x256x128xbf16>, tensor<1x1x256x128xbf16>, tensor<1x1x256x128xbf16>, tensor<1x1x256x8xi32>,
        tensor<1x16x256x128xbf16>, tensor<1x16x256xf32> -> tensor<1x16x256x128xbf16>, tensor<1x16x256xf32>
  return %a#0, %b#0 : tensor<1x16x256x128xbf16>, tensor<1x16x256x128xbf16>
}

// -----

// The backward's key kernel: the register kernel's steps on a warpgroup
// where the chip has wgmma and C = 64 with d and dv multiples of 64, on
// mma.sync elsewhere (C = 32 here, or sm_90), staged where asked.
// CHECK-LABEL: func.func @grad_keys
// CHECK: pisa.kernel.sparse_attention_grad_keys {{.*}}block_size = 64 {{.*}}kernel_config = #pisa.kernel_config<variant = wgmma, threads = 128, epilogue = registers, min_blocks_per_sm = 2>
// CHECK: pisa.kernel.sparse_attention_grad_keys {{.*}}block_size = 32 {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 2>
// CHECK: pisa.kernel.sparse_attention_grad_keys {{.*}}block_size = 64 {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = shared, min_blocks_per_sm = 1>
// SM90-LABEL: func.func @grad_keys
// SM90: pisa.kernel.sparse_attention_grad_keys {{.*}}block_size = 64 {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 2>
// GPU-LABEL: gpu.func @sparse_attention_grad_keys(
// GPU: nvvm.wgmma.mma_async
func.func @grad_keys(%q: memref<1x4x10x64xbf16>, %k: memref<1x1x10x64xbf16>, %v: memref<1x1x10x64xbf16>, %s: memref<1x1x10x3xi32>, %off: index, %l: memref<1x4x10xf32>, %dd: memref<1x4x10xf32>, %do: memref<1x4x10x64xbf16>, %dk: memref<1x1x10x64xf32>, %dv: memref<1x1x10x64xf32>, %index: memref<1x1x1x6xi32>, %list: memref<1x1x10x3xi32>, %acc: memref<1x1x10x128xf32>) {
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk, %dv, %index, %list, %acc) block_size = 64 scale = 0.125
      : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10xf32>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x1x10x64xf32>, memref<1x1x10x64xf32>, memref<1x1x1x6xi32>, memref<1x1x10x3xi32>, memref<1x1x10x128xf32>
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk, %dv, %index, %list, %acc) block_size = 32 scale = 0.125
      : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10xf32>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x1x10x64xf32>, memref<1x1x10x64xf32>, memref<1x1x1x6xi32>, memref<1x1x10x3xi32>, memref<1x1x10x128xf32>
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk, %dv, %index, %list, %acc) block_size = 64 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, epilogue = shared>}
      : memref<1x4x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x64xbf16>, memref<1x1x10x3xi32>, memref<1x4x10xf32>, memref<1x4x10xf32>, memref<1x4x10x64xbf16>, memref<1x1x10x64xf32>, memref<1x1x10x64xf32>, memref<1x1x1x6xi32>, memref<1x1x10x3xi32>, memref<1x1x10x128xf32>
  return
}

// -----

// The backward's dq pass: the register kernel (a warp a query, dQ in
// registers, no copying warp) where it takes the sizes; query tiles of 3
// where dv is a multiple of 16 but not of 32 (dO's fragments are loaded 32
// columns at a time); the staged kernel where asked (or G > 16).
// CHECK-LABEL: func.func @grad_queries
// CHECK: pisa.kernel.sparse_attention_grad_queries {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 2>
// CHECK: pisa.kernel.sparse_attention_grad_queries {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, union_queries = 3, min_blocks_per_sm = 2>
// CHECK: pisa.kernel.sparse_attention_grad_queries {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = shared, min_blocks_per_sm = {{[0-9]+}}>
// GPU-LABEL: gpu.func @sparse_attention_grad_queries(
// GPU-NOT: nvgpu.mbarrier.create
// GPU: nvgpu.device_async_copy
// GPU-LABEL: gpu.func @sparse_attention_grad_queries_0(
// GPU: nvgpu.mbarrier.create
func.func @grad_queries(%q: memref<1x16x10x128xbf16>, %k: memref<1x1x10x128xbf16>, %v: memref<1x1x10x128xbf16>, %v48: memref<1x1x10x48xbf16>, %s: memref<1x1x10x8xi32>, %off: index, %o: memref<1x16x10x128xbf16>, %o48: memref<1x16x10x48xbf16>, %l: memref<1x16x10xf32>, %do: memref<1x16x10x128xbf16>, %do48: memref<1x16x10x48xbf16>, %dq: memref<1x16x10x128xf32>, %dd: memref<1x16x10xf32>) {
  pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %s, %off, %o, %l, %do outs(%dq, %dd) block_size = 64 scale = 0.125
      : memref<1x16x10x128xbf16>, memref<1x1x10x128xbf16>, memref<1x1x10x128xbf16>, memref<1x1x10x8xi32>, memref<1x16x10x128xbf16>, memref<1x16x10xf32>, memref<1x16x10x128xbf16>, memref<1x16x10x128xf32>, memref<1x16x10xf32>
  pisa.kernel.sparse_attention_grad_queries %q, %k, %v48, %s, %off, %o48, %l, %do48 outs(%dq, %dd) block_size = 64 scale = 0.125
      : memref<1x16x10x128xbf16>, memref<1x1x10x128xbf16>, memref<1x1x10x48xbf16>, memref<1x1x10x8xi32>, memref<1x16x10x48xbf16>, memref<1x16x10xf32>, memref<1x16x10x48xbf16>, memref<1x16x10x128xf32>, memref<1x16x10xf32>
  pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %s, %off, %o, %l, %do outs(%dq, %dd) block_size = 64 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, epilogue = shared>}
      : memref<1x16x10x128xbf16>, memref<1x1x10x128xbf16>, memref<1x1x10x128xbf16>, memref<1x1x10x8xi32>, memref<1x16x10x128xbf16>, memref<1x16x10xf32>, memref<1x16x10x128xbf16>, memref<1x16x10x128xf32>, memref<1x16x10xf32>
  return
}
