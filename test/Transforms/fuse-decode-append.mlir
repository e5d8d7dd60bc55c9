// RUN: pisa-opt %s --pisa-fuse-decode-append --split-input-file | FileCheck %s --enable-var-scope

// A decode step in buffer form: the append of the new keys into the cache,
// host-side ops without memory effects, then the single-stage selection of
// the step's one query over that cache. The pass makes them one
// pisa.kernel.append_select_single_stage with the selection's operands and
// attributes and the append's keys, from and to.

// CHECK-LABEL: func.func @decode_step
// CHECK-SAME: (%[[Q:.*]]: memref<2x16x1x128xbf16>, %[[K:.*]]: memref<2x1x?x128xbf16>, %[[KC:.*]]: memref<2x1x8192x128xbf16>, %[[P:.*]]: memref<2x1x255x128xf32>, %[[FROM:.*]]: memref<2xi32>, %[[TO:.*]]: memref<2xi32>, %[[OFF:.*]]: index, %[[S:.*]]: memref<2x1x1x8xi32>)
// CHECK-NOT: pisa.kernel.pyramid_append
// CHECK: %[[T:.*]] = arith.addi %[[OFF]]
// CHECK-NEXT: pisa.kernel.append_select_single_stage %[[Q]], %[[K]], %[[P]], %[[T]], %[[KC]], %[[FROM]], %[[TO]] outs(%[[S]]) topk = 8 block_size = 64 branching = 2 scale = 0.0883883461 capacity = 8192
// CHECK-NOT: pisa.kernel.select_single_stage
func.func @decode_step(%q: memref<2x16x1x128xbf16>, %k: memref<2x1x?x128xbf16>,
                       %kc: memref<2x1x8192x128xbf16>, %p: memref<2x1x255x128xf32>,
                       %from: memref<2xi32>, %to: memref<2xi32>, %off: index,
                       %s: memref<2x1x1x8xi32>) {
  pisa.kernel.pyramid_append %kc, %from, %to outs(%p) block_size = 64 branching = 2
      : memref<2x1x8192x128xbf16>, memref<2xi32>, memref<2xi32>, memref<2x1x255x128xf32>
  %c1 = arith.constant 1 : index
  %t = arith.addi %off, %c1 : index
  pisa.kernel.select_single_stage %q, %k, %p, %t outs(%s) topk = 8 block_size = 64
      branching = 2 scale = 0.0883883461 capacity = 8192
      : memref<2x16x1x128xbf16>, memref<2x1x?x128xbf16>, memref<2x1x255x128xf32>, memref<2x1x1x8xi32>
  return
}

// -----

// Cases left as they are, one rule each: two queries per KV head (not a
// decode block); a different cache; a buffer written between them; a
// paged append (block table); another block size; a dynamic batch.

// CHECK-LABEL: func.func @two_queries
// CHECK: pisa.kernel.pyramid_append
// CHECK: pisa.kernel.select_single_stage
// CHECK-NOT: append_select_single_stage
func.func @two_queries(%q: memref<1x16x2x128xbf16>, %k: memref<1x1x?x128xbf16>,
                       %kc: memref<1x1x8192x128xbf16>, %p: memref<1x1x255x128xf32>,
                       %from: memref<1xi32>, %to: memref<1xi32>, %off: index,
                       %s: memref<1x1x2x8xi32>) {
  pisa.kernel.pyramid_append %kc, %from, %to outs(%p) block_size = 64 branching = 2
      : memref<1x1x8192x128xbf16>, memref<1xi32>, memref<1xi32>, memref<1x1x255x128xf32>
  pisa.kernel.select_single_stage %q, %k, %p, %off outs(%s) topk = 8 block_size = 64
      branching = 2 scale = 0.0883883461 capacity = 8192
      : memref<1x16x2x128xbf16>, memref<1x1x?x128xbf16>, memref<1x1x255x128xf32>, memref<1x1x2x8xi32>
  return
}

// CHECK-LABEL: func.func @other_cache
// CHECK: pisa.kernel.pyramid_append
// CHECK: pisa.kernel.select_single_stage
// CHECK-NOT: append_select_single_stage
func.func @other_cache(%q: memref<1x16x1x128xbf16>, %k: memref<1x1x?x128xbf16>,
                       %kc: memref<1x1x8192x128xbf16>, %p: memref<1x1x255x128xf32>,
                       %p2: memref<1x1x255x128xf32>,
                       %from: memref<1xi32>, %to: memref<1xi32>, %off: index,
                       %s: memref<1x1x1x8xi32>) {
  pisa.kernel.pyramid_append %kc, %from, %to outs(%p) block_size = 64 branching = 2
      : memref<1x1x8192x128xbf16>, memref<1xi32>, memref<1xi32>, memref<1x1x255x128xf32>
  pisa.kernel.select_single_stage %q, %k, %p2, %off outs(%s) topk = 8 block_size = 64
      branching = 2 scale = 0.0883883461 capacity = 8192
      : memref<1x16x1x128xbf16>, memref<1x1x?x128xbf16>, memref<1x1x255x128xf32>, memref<1x1x1x8xi32>
  return
}

// CHECK-LABEL: func.func @write_between
// CHECK: pisa.kernel.pyramid_append
// CHECK: memref.store
// CHECK: pisa.kernel.select_single_stage
// CHECK-NOT: append_select_single_stage
func.func @write_between(%q: memref<1x16x1x128xbf16>, %k: memref<1x1x?x128xbf16>,
                         %kc: memref<1x1x8192x128xbf16>, %p: memref<1x1x255x128xf32>,
                         %from: memref<1xi32>, %to: memref<1xi32>, %off: index,
                         %s: memref<1x1x1x8xi32>) {
  pisa.kernel.pyramid_append %kc, %from, %to outs(%p) block_size = 64 branching = 2
      : memref<1x1x8192x128xbf16>, memref<1xi32>, memref<1xi32>, memref<1x1x255x128xf32>
  %c0 = arith.constant 0 : index
  %z = arith.constant 0 : i32
  memref.store %z, %to[%c0] : memref<1xi32>
  pisa.kernel.select_single_stage %q, %k, %p, %off outs(%s) topk = 8 block_size = 64
      branching = 2 scale = 0.0883883461 capacity = 8192
      : memref<1x16x1x128xbf16>, memref<1x1x?x128xbf16>, memref<1x1x255x128xf32>, memref<1x1x1x8xi32>
  return
}

// CHECK-LABEL: func.func @paged
// CHECK: pisa.kernel.pyramid_append {{.*}} block_table
// CHECK: pisa.kernel.select_single_stage
// CHECK-NOT: append_select_single_stage
func.func @paged(%q: memref<1x16x1x128xbf16>, %k: memref<1x1x?x128xbf16>,
                 %pool: memref<64x128x1x128xbf16>, %bt: memref<1x64xi32>,
                 %p: memref<1x1x255x128xf32>,
                 %from: memref<1xi32>, %to: memref<1xi32>, %off: index,
                 %s: memref<1x1x1x8xi32>) {
  pisa.kernel.pyramid_append %pool, %from, %to block_table(%bt : memref<1x64xi32>) outs(%p) block_size = 64 branching = 2
      : memref<64x128x1x128xbf16>, memref<1xi32>, memref<1xi32>, memref<1x1x255x128xf32>
  pisa.kernel.select_single_stage %q, %k, %p, %off outs(%s) topk = 8 block_size = 64
      branching = 2 scale = 0.0883883461 capacity = 8192
      : memref<1x16x1x128xbf16>, memref<1x1x?x128xbf16>, memref<1x1x255x128xf32>, memref<1x1x1x8xi32>
  return
}

// CHECK-LABEL: func.func @other_block_size
// CHECK: pisa.kernel.pyramid_append
// CHECK: pisa.kernel.select_single_stage
// CHECK-NOT: append_select_single_stage
func.func @other_block_size(%q: memref<1x16x1x128xbf16>, %k: memref<1x1x?x128xbf16>,
                            %kc: memref<1x1x8192x128xbf16>, %p: memref<1x1x255x128xf32>,
                            %from: memref<1xi32>, %to: memref<1xi32>, %off: index,
                            %s: memref<1x1x1x8xi32>) {
  pisa.kernel.pyramid_append %kc, %from, %to outs(%p) block_size = 32 branching = 2
      : memref<1x1x8192x128xbf16>, memref<1xi32>, memref<1xi32>, memref<1x1x255x128xf32>
  pisa.kernel.select_single_stage %q, %k, %p, %off outs(%s) topk = 8 block_size = 64
      branching = 2 scale = 0.0883883461 capacity = 8192
      : memref<1x16x1x128xbf16>, memref<1x1x?x128xbf16>, memref<1x1x255x128xf32>, memref<1x1x1x8xi32>
  return
}

// CHECK-LABEL: func.func @dynamic_batch
// CHECK: pisa.kernel.pyramid_append
// CHECK: pisa.kernel.select_single_stage
// CHECK-NOT: append_select_single_stage
func.func @dynamic_batch(%q: memref<?x16x1x128xbf16>, %k: memref<?x1x?x128xbf16>,
                         %kc: memref<?x1x8192x128xbf16>, %p: memref<?x1x255x128xf32>,
                         %from: memref<?xi32>, %to: memref<?xi32>, %off: index,
                         %s: memref<?x1x1x8xi32>) {
  pisa.kernel.pyramid_append %kc, %from, %to outs(%p) block_size = 64 branching = 2
      : memref<?x1x8192x128xbf16>, memref<?xi32>, memref<?xi32>, memref<?x1x255x128xf32>
  pisa.kernel.select_single_stage %q, %k, %p, %off outs(%s) topk = 8 block_size = 64
      branching = 2 scale = 0.0883883461 capacity = 8192
      : memref<?x16x1x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x255x128xf32>, memref<?x1x1x8xi32>
  return
}
