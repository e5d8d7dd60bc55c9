// RUN: pisa-opt %s --split-input-file --pisa-configure-kernels="chip=sm_90 attention-union-queries=4" -verify-diagnostics | FileCheck %s --enable-var-scope
// RUN: pisa-opt %s --split-input-file --pisa-configure-kernels=chip=sm_90 | FileCheck %s --enable-var-scope --check-prefix=DEFAULT
// RUN: not pisa-opt %s --split-input-file --pisa-configure-kernels="chip=sm_90 attention-union-queries=33" 2>&1 | FileCheck %s --enable-var-scope --check-prefix=RANGE
// RUN: pisa-opt %s --split-input-file --pisa-configure-kernels="chip=sm_90 attention-union-queries=7" | FileCheck %s --enable-var-scope --check-prefix=SEVEN

// --pisa-configure-kernels attention-union-queries=W: sparse attention on
// query tiles of W queries, and the backward's dq pass on tiles of W
// queries instead of a warp per query, wherever those kernels take the
// sizes and the op's configuration leaves the choice open; elsewhere the
// default choice.

// The paper's shape: query tiles (without the option: the register kernel).
// CHECK-LABEL: func.func @paper
// CHECK: kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 160, epilogue = registers, union_queries = 4, min_blocks_per_sm = 1>
// DEFAULT-LABEL: func.func @paper
// DEFAULT: kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 2>
// SEVEN-LABEL: func.func @paper
// SEVEN: kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 256, epilogue = registers, union_queries = 7, min_blocks_per_sm = 1>
// RANGE: error: expected attention-union-queries in [0, 7] but got 33
func.func @paper(%q: memref<1x16x64x128xbf16>, %k: memref<1x1x64x128xbf16>, %v: memref<1x1x64x128xbf16>, %s: memref<1x1x64x8xi32>, %off: index, %o: memref<1x16x64x128xbf16>, %l: memref<1x16x64xf32>) {
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 64 scale = 0.0883883461
      : memref<1x16x64x128xbf16>, memref<1x1x64x128xbf16>, memref<1x1x64x128xbf16>, memref<1x1x64x8xi32>, memref<1x16x64x128xbf16>, memref<1x16x64xf32>
  return
}

// -----

// G = 32 is not one m16 tile: the staged kernel, as without the option.
// CHECK-LABEL: func.func @wide
// CHECK: kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = shared, min_blocks_per_sm = {{[0-9]+}}>
func.func @wide(%q: memref<1x32x10x64xf16>, %k: memref<1x1x10x64xf16>, %v: memref<1x1x10x64xf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x32x10x64xf16>, %l: memref<1x32x10xf32>) {
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 32 scale = 0.125
      : memref<1x32x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x3xi32>, memref<1x32x10x64xf16>, memref<1x32x10xf32>
  return
}

// -----

// C = 48 is not a query-tile block size: the register kernel.
// CHECK-LABEL: func.func @block48
// CHECK: kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 2>
func.func @block48(%q: memref<1x8x10x64xf16>, %k: memref<1x1x10x64xf16>, %v: memref<1x1x10x64xf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x8x10x64xf16>, %l: memref<1x8x10xf32>) {
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 48 scale = 0.125
      : memref<1x8x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x3xi32>, memref<1x8x10x64xf16>, memref<1x8x10xf32>
  return
}

// -----

// A configuration that asks for the staged kernel keeps it.
// CHECK-LABEL: func.func @asked
// CHECK: kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = shared, min_blocks_per_sm = {{[0-9]+}}>
func.func @asked(%q: memref<1x4x10x64xf16>, %k: memref<1x1x10x64xf16>, %v: memref<1x1x10x64xf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x4x10x64xf16>, %l: memref<1x4x10xf32>) {
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 32 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, epilogue = shared>}
      : memref<1x4x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x3xi32>, memref<1x4x10x64xf16>, memref<1x4x10xf32>
  return
}

// -----

// Other ops are not affected.
// CHECK-LABEL: func.func @pyramid
// CHECK: kernel_config = #pisa.kernel_config<variant = simt, threads = 128>
func.func @pyramid(%k: memref<1x1x512x128xbf16>, %p: memref<1x1x15x128xf32>) {
  pisa.kernel.pyramid %k outs(%p) block_size = 64 branching = 2
      : memref<1x1x512x128xbf16>, memref<1x1x15x128xf32>
  return
}

// -----

// The backward's dq pass: tiles of W queries (without the option: the
// register dq kernel, a warp a query, no union_queries).
// CHECK-LABEL: func.func @grad
// CHECK: kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 160, epilogue = registers, union_queries = 4, min_blocks_per_sm = 1>
// DEFAULT-LABEL: func.func @grad
// DEFAULT: kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 2>
// SEVEN-LABEL: func.func @grad
// SEVEN: kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 256, epilogue = registers, union_queries = 7, min_blocks_per_sm = 1>
func.func @grad(%q: memref<1x16x10x128xbf16>, %k: memref<1x1x10x128xbf16>, %v: memref<1x1x10x128xbf16>, %s: memref<1x1x10x8xi32>, %off: index, %o: memref<1x16x10x128xbf16>, %l: memref<1x16x10xf32>, %do: memref<1x16x10x128xbf16>, %dq: memref<1x16x10x128xf32>, %dd: memref<1x16x10xf32>) {
  pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %s, %off, %o, %l, %do outs(%dq, %dd) block_size = 64 scale = 0.125
      : memref<1x16x10x128xbf16>, memref<1x1x10x128xbf16>, memref<1x1x10x128xbf16>, memref<1x1x10x8xi32>, memref<1x16x10x128xbf16>, memref<1x16x10xf32>, memref<1x16x10x128xbf16>, memref<1x16x10x128xf32>, memref<1x16x10xf32>
  return
}
