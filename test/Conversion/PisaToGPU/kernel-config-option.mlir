// RUN: pisa-opt %s --pisa-configure-kernels | FileCheck %s --enable-var-scope --check-prefix=NONE
// RUN: pisa-opt %s --pisa-configure-kernels="kernel-config=sparse_attention:prefetch_ahead=1,pisa.kernel.sparse_attention:min_blocks_per_sm=1,walk:variant=simt" | FileCheck %s --enable-var-scope --check-prefix=ASKED
// RUN: pisa-opt %s --pisa-configure-kernels="kernel-config=sparse_attention_grad_queries:union_queries=4" | FileCheck %s --enable-var-scope --check-prefix=TILES
// RUN: pisa-opt %s --pisa-configure-kernels="kernel-config=sparse_attention:prefetch_ahead=1" --convert-pisa-to-gpu | FileCheck %s --enable-var-scope --check-prefix=GPU

// kernel-config asks fields of every op of one kind, over the fields the
// op's own configuration sets; the rest are chosen as without it. A kind
// the program lacks (walk) is not an error.

// NONE-LABEL: func.func @attend
// NONE: pisa.kernel.sparse_attention {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 2, prefetch_ahead = 2>
// NONE: pisa.kernel.sparse_attention {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 2>}
// NONE: pisa.kernel.sparse_attention_grad_queries {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 2>}

// ASKED-LABEL: func.func @attend
// ASKED: pisa.kernel.sparse_attention {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 1, prefetch_ahead = 1>
// ASKED: pisa.kernel.sparse_attention {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 1, prefetch_ahead = 1>
// ASKED: pisa.kernel.sparse_attention_grad_queries {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 2>}

// An asked field decides the others as the op's own would: query tiles of
// four queries for the dq pass, a warp more than its queries.
// TILES: pisa.kernel.sparse_attention_grad_queries {{.*}}kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 160, epilogue = registers, union_queries = 4

// Both attention kernels prefetch one entry ahead, the dq kernel not.
// GPU: gpu.func @sparse_attention(
// GPU: nvvm.cp.async.bulk.prefetch
// GPU: gpu.func @sparse_attention_0(
// GPU: nvvm.cp.async.bulk.prefetch
// GPU: gpu.func @sparse_attention_grad_queries(
// GPU-NOT: nvvm.cp.async.bulk.prefetch

// Refused entries: the pass fails with one error naming the entry.
// RUN: not pisa-opt %s --pisa-configure-kernels="kernel-config=attention:prefetch_ahead=1" 2>&1 | FileCheck %s --enable-var-scope --check-prefix=NOOP
// NOOP: error: kernel-config 'attention:prefetch_ahead=1': 'attention' is not a kernel-level op (pisa.kernel.*)
// RUN: not pisa-opt %s --pisa-configure-kernels="kernel-config=sparse_attention" 2>&1 | FileCheck %s --enable-var-scope --check-prefix=FORM
// FORM: error: expected kernel-config 'OP:FIELD=VALUE' (e.g. 'sparse_attention:prefetch_ahead=2') but got 'sparse_attention'
// RUN: not pisa-opt %s --pisa-configure-kernels="kernel-config=sparse_attention:ahead=1" 2>&1 | FileCheck %s --enable-var-scope --check-prefix=FIELD
// FIELD: error: kernel-config of pisa.kernel.sparse_attention: unknown kernel_config field 'ahead'
// RUN: not pisa-opt %s --pisa-configure-kernels="kernel-config=sparse_attention:prefetch_ahead=1,sparse_attention:prefetch_ahead=2" 2>&1 | FileCheck %s --enable-var-scope --check-prefix=TWICE
// TWICE: error: kernel-config of pisa.kernel.sparse_attention: kernel_config field 'prefetch_ahead' is given twice
// RUN: not pisa-opt %s --pisa-configure-kernels="kernel-config=sparse_attention:prefetch_ahead=9" 2>&1 | FileCheck %s --enable-var-scope --check-prefix=RANGE
// RANGE: error: kernel-config of pisa.kernel.sparse_attention: expected kernel_config prefetch_ahead in [0, 8] but got 9
// RUN: not pisa-opt %s --pisa-configure-kernels="kernel-config=sparse_attention:prefetch_ahead=1>,sparse_attention:variant=simt" 2>&1 | FileCheck %s --enable-var-scope --check-prefix=TRAIL
// TRAIL: error: kernel-config of pisa.kernel.sparse_attention: expected FIELD=VALUE but got 'prefetch_ahead=1>, variant=simt'
// A field the op's kernels cannot follow fails on the op, as its own would.
// RUN: not pisa-opt %s --pisa-configure-kernels="kernel-config=sparse_attention:variant=wgmma" 2>&1 | FileCheck %s --enable-var-scope --check-prefix=KERNEL
// KERNEL: error: 'pisa.kernel.sparse_attention' op kernel_config variant = wgmma is not supported here: sparse attention runs on mma_sync
func.func @attend(%q: memref<?x16x?x128xbf16>, %k: memref<?x1x?x128xbf16>, %v: memref<?x1x?x64xbf16>, %s: memref<?x1x?x8xi32>, %off: index, %o: memref<?x16x?x64xbf16>, %l: memref<?x16x?xf32>, %do: memref<?x16x?x64xbf16>, %dq: memref<?x16x?x128xf32>, %dd: memref<?x16x?xf32>) {
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 64 scale = 0.125
      {kernel_config = #pisa.kernel_config<prefetch_ahead = 2>}
      : memref<?x16x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x8xi32>, memref<?x16x?x64xbf16>, memref<?x16x?xf32>
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 64 scale = 0.125
      : memref<?x16x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x8xi32>, memref<?x16x?x64xbf16>, memref<?x16x?xf32>
  pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %s, %off, %o, %l, %do outs(%dq, %dd) block_size = 64 scale = 0.125
      : memref<?x16x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x8xi32>, memref<?x16x?x64xbf16>, memref<?x16x?xf32>, memref<?x16x?x64xbf16>, memref<?x16x?x128xf32>, memref<?x16x?xf32>
  return
}
