// RUN: pisa-opt %s --split-input-file --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope
// RUN: pisa-opt %s --split-input-file --pisa-configure-kernels | FileCheck %s --check-prefix=CONFIG --enable-var-scope

// The register attention kernel asked to prefetch (kernel_config
// prefetch_ahead = 2): at list entry j, every lane asks the L2 for rows of
// entry j + 2's block (lane, lane + 32) of K (d = 128: 256 bytes a row)
// and of V (dv = 64: 128 bytes), those below N only, before it reads entry
// j's K into mma fragments and copies its V.

// CONFIG: kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 2, prefetch_ahead = 2>

// CHECK: gpu.func @sparse_attention
// CHECK: %[[KMETA:.*]], %{{.*}}, %{{.*}}:4, %[[KSTRIDES:.*]]:4 = memref.extract_strided_metadata %{{.*}} : memref<?x1x?x128xbf16>
// CHECK: %[[KPTR:.*]] = memref.extract_aligned_pointer_as_index %[[KMETA]]
// CHECK: %[[VMETA:.*]], %{{.*}}, %{{.*}}:4, %[[VSTRIDES:.*]]:4 = memref.extract_strided_metadata %{{.*}} : memref<?x1x?x64xbf16>
// CHECK: %[[VPTR:.*]] = memref.extract_aligned_pointer_as_index %[[VMETA]]
// CHECK: scf.for %[[J:.*]] = %c0 to %[[COUNT:.*]] step %c1
// CHECK-NEXT: %[[AHEAD:.*]] = arith.addi %[[J]], %c2 : index
// CHECK-NEXT: %[[LISTED:.*]] = arith.cmpi ult, %[[AHEAD]], %[[COUNT]] : index
// CHECK-NEXT: scf.if %[[LISTED]] {
// CHECK-NEXT: %[[BLOCK:.*]] = memref.load %[[LIST:.*]][%[[AHEAD]]] : memref<8xi32, #gpu.address_space<workgroup>>
// CHECK-NEXT: %[[BLOCKI:.*]] = arith.index_cast %[[BLOCK]] : i32 to index
// CHECK-NEXT: %[[FIRST:.*]] = arith.muli %[[BLOCKI]], %c64 : index
// CHECK-NEXT: scf.for %[[R:.*]] = %[[LANE:.*]] to %c64 step %c32 {
// CHECK-NEXT: %[[KEY:.*]] = arith.addi %[[FIRST]], %[[R]] : index
// CHECK-NEXT: %[[REAL:.*]] = arith.cmpi ult, %[[KEY]], %[[N:.*]] : index
// CHECK-NEXT: scf.if %[[REAL]] {
// CHECK: arith.muli %[[KEY]], %c128 : index
// CHECK: nvvm.cp.async.bulk.prefetch %{{.*}}, %c256_i32 : <1>
// CHECK: arith.muli %[[KEY]], %c64 : index
// CHECK: nvvm.cp.async.bulk.prefetch %{{.*}}, %c128_i32 : <1>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
// Then entry j itself.
// CHECK-NEXT: memref.load %[[LIST]][%[[J]]]
func.func @attend(%q: memref<?x16x?x128xbf16>, %k: memref<?x1x?x128xbf16>, %v: memref<?x1x?x64xbf16>, %s: memref<?x1x?x8xi32>, %off: index, %o: memref<?x16x?x64xbf16>, %l: memref<?x16x?xf32>) {
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 64 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, prefetch_ahead = 2>}
      : memref<?x16x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x8xi32>, memref<?x16x?x64xbf16>, memref<?x16x?xf32>
  return
}

// -----

// Not asked: no prefetch (the default).
// CONFIG: kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 2>}
// CHECK: gpu.func @sparse_attention
// CHECK-NOT: nvvm.cp.async.bulk.prefetch
// CHECK: gpu.return
func.func @attend(%q: memref<?x16x?x128xbf16>, %k: memref<?x1x?x128xbf16>, %v: memref<?x1x?x64xbf16>, %s: memref<?x1x?x8xi32>, %off: index, %o: memref<?x16x?x64xbf16>, %l: memref<?x16x?xf32>) {
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 64 scale = 0.125
      : memref<?x16x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x8xi32>, memref<?x16x?x64xbf16>, memref<?x16x?xf32>
  return
}

// -----

// The register dq kernel (the same warp-per-query loop over its list) asked
// for one entry ahead: entry j + 1's K (256 bytes a row) and V (128).
// CONFIG: kernel_config = #pisa.kernel_config<variant = mma_sync, threads = 128, epilogue = registers, min_blocks_per_sm = 2, prefetch_ahead = 1>
// CHECK: gpu.func @sparse_attention_grad_queries
// CHECK: scf.for %[[J:.*]] = %c0 to %[[COUNT:.*]] step %c1
// CHECK-NEXT: %[[AHEAD:.*]] = arith.addi %[[J]], %c1 : index
// CHECK-NEXT: %[[LISTED:.*]] = arith.cmpi ult, %[[AHEAD]], %[[COUNT]] : index
// CHECK-NEXT: scf.if %[[LISTED]] {
// CHECK: nvvm.cp.async.bulk.prefetch %{{.*}}, %c256_i32 : <1>
// CHECK: nvvm.cp.async.bulk.prefetch %{{.*}}, %c128_i32 : <1>
func.func @grad(%q: memref<?x16x?x128xbf16>, %k: memref<?x1x?x128xbf16>, %v: memref<?x1x?x64xbf16>, %s: memref<?x1x?x8xi32>, %off: index, %o: memref<?x16x?x64xbf16>, %l: memref<?x16x?xf32>, %do: memref<?x16x?x64xbf16>, %dq: memref<?x16x?x128xf32>, %dd: memref<?x16x?xf32>) {
  pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %s, %off, %o, %l, %do outs(%dq, %dd) block_size = 64 scale = 0.125
      {kernel_config = #pisa.kernel_config<variant = mma_sync, prefetch_ahead = 1>}
      : memref<?x16x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x8xi32>, memref<?x16x?x64xbf16>, memref<?x16x?xf32>, memref<?x16x?x64xbf16>, memref<?x16x?x128xf32>, memref<?x16x?xf32>
  return
}
