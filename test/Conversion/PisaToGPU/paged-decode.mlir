// RUN: pisa-opt %s --pisa-decompose-to-kernels | FileCheck %s --enable-var-scope --check-prefix=KERNELS
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope

// A decode step over a paged key cache: a pool of P pages of S = 16 keys
// ([P, S, Hkv, d], vLLM's NHD layout) read through block_table [B, Mp]
// (Mp = 128, so Ncap = 2048), the pyramid caches per sequence. Both
// kernels read key j of sequence b at keys[table[b, j / 16], j % 16] and
// check that every page below the sequence's length lies in [0, P).

// KERNELS-LABEL: func.func @paged_step
// KERNELS: cf.assert %{{.*}}, "pisa.pyramid_append: the block_table's batch differs from the cache's"
// KERNELS: cf.assert %{{.*}}, "pisa.pyramid_append: the from's batch differs from the cache's"
// KERNELS: cf.assert %{{.*}}, "pisa.pyramid_append: the to's batch differs from the cache's"
// KERNELS: %[[P:.*]] = pisa.kernel.pyramid_append %{{.*}}, %{{.*}}, %{{.*}} block_table(%{{.*}} : tensor<?x128xi32>) outs(%{{.*}})
// KERNELS: cf.assert %{{.*}}, "pisa.decode_select: the block_table's batch differs from the queries'"
// KERNELS: pisa.kernel.select_decode %{{.*}}, %{{.*}}, %[[P]], %{{.*}} block_table(%{{.*}} : tensor<?x128xi32>) outs(%{{.*}}) topk = 8

// CHECK-LABEL: func.func @paged_step
// CHECK-SAME: %[[POOL:[a-z0-9]+]]: memref<?x16x2x64xbf16>
// The append's grid is the cache's B x Hkv (the pool's dim 0 counts pages).
// CHECK: gpu.launch_func @pisa_kernels::@pyramid_append {{.*}} args(%[[POOL]] : memref<?x16x2x64xbf16>, {{.*}} : memref<?xi32>, {{.*}} : memref<?xi32>, {{.*}} : memref<?x128xi32>, {{.*}} : memref<?x2x63x64xf32>)
// CHECK: gpu.launch_func @pisa_kernels::@select_decode {{.*}} args({{.*}} : memref<?x16x1x64xbf16>, %[[POOL]] : memref<?x16x2x64xbf16>, {{.*}} : memref<?x2x63x64xf32>, {{.*}} : memref<?xi32>, {{.*}} : memref<?x128xi32>, {{.*}} : memref<?x2x1x8xi32>)

// The append: a shared flag gathers the threads' page checks (entries
// below ceil(to / S), stepping by the block's 1024 threads) before any
// node is written.
// CHECK: gpu.func @pyramid_append
// CHECK-SAME: workgroup(%[[FLAG:.*]] : memref<1xi32, #gpu.address_space<workgroup>>)
// CHECK: memref.store %c0_i32, %[[FLAG]][%c0]
// CHECK: gpu.barrier
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %c1024
// CHECK: %[[PG:.*]] = memref.load %{{.*}}[%{{.*}}, %[[I]]] : memref<?x128xi32>
// CHECK: memref.store %c1_i32, %[[FLAG]][%c0]
// CHECK: gpu.barrier
// CHECK: memref.load %[[FLAG]][%c0]
// A leaf's keys through the table.
// CHECK: %[[PAGE:.*]] = memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x128xi32>
// CHECK: %[[PIDX:.*]] = arith.index_cast %[[PAGE]] : i32 to index
// CHECK: %[[SLOT:.*]] = arith.remui %{{.*}}, %c16 : index
// CHECK: memref.load %{{.*}}[%[[PIDX]], %[[SLOT]], %{{.*}}, %{{.*}}] : memref<?x16x2x64xbf16>

// The selection: the warp's lanes check the pages (stepping by 32) and
// combine their verdicts with xor shuffles; the leaf scoring reads keys
// through the table (16-byte rows of the tensor-core leaf scorer).
// CHECK: gpu.func @select_decode
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c32 iter_args(%{{.*}} = %c0_i32) -> (i32)
// CHECK: gpu.shuffle xor
// CHECK: %[[KPAGE:.*]] = memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x128xi32>
// CHECK: %[[KIDX:.*]] = arith.index_cast %[[KPAGE]] : i32 to index
// CHECK: vector.load %{{.*}}[%[[KIDX]], %{{.*}}, %{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<?x16x2x64xbf16>, vector<8xbf16>
func.func @paged_step(%q: tensor<?x16x1x64xbf16>, %pool: tensor<?x16x2x64xbf16>,
                      %p: tensor<?x2x63x64xf32>, %from: tensor<?xi32>,
                      %to: tensor<?xi32>, %bt: tensor<?x128xi32>)
    -> tensor<?x2x1x8xi32> {
  %p1 = pisa.pyramid_append %pool, %p, %from, %to block_table(%bt : tensor<?x128xi32>)
      block_size = 64 branching = 2
      : tensor<?x16x2x64xbf16>, tensor<?x2x63x64xf32>, tensor<?xi32>, tensor<?xi32>
      -> tensor<?x2x63x64xf32>
  %s = pisa.decode_select %q, %pool, %p1 seq_lens(%to) block_table(%bt : tensor<?x128xi32>)
      topk = 8 block_size = 64 branching = 2
      : tensor<?x16x1x64xbf16>, tensor<?x16x2x64xbf16>, tensor<?x2x63x64xf32>,
        tensor<?xi32> -> tensor<?x2x1x8xi32>
  return %s : tensor<?x2x1x8xi32>
}
