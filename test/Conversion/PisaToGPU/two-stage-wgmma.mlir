// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu | FileCheck %s --enable-var-scope
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels=chip=sm_90 --convert-pisa-to-gpu=chip=sm_90 | FileCheck %s --check-prefix=SM90 --enable-var-scope

// Stage 2 at the paper's setting for sm_90a (the default chip): a block is
// one warpgroup scoring 64-row tiles (4 queries x G = 16) with wgmma. Both
// operands come from shared memory in the 128-byte swizzle, copied in by
// cp.async bypassing L1, one query tile at a time (a second buffer for
// the next tile's queries cost a block an SM and measured slower); the
// next tile's copy is issued once this tile's product is done.
// sm_90 keeps the mma.sync scorer (two-stage.mlir).

// SM90: gpu.launch_func @pisa_kernels::@select_stage2_score_tiles_mma
// SM90-NOT: wgmma

//   Up to 16384 + 64 tiles, 8 per block: 2056 blocks of one warpgroup.
// CHECK: gpu.launch_func @pisa_kernels::@select_stage2_score_tiles_wgmma blocks in ({{%c2056(_[0-9]+)?}}, {{.*}} threads in ({{%c128(_[0-9]+)?}}
//   The 16 KiB query tile and the 16 KiB key tile, 1024-byte aligned as
//   the swizzle needs; six blocks an SM (shared memory and registers both allow six).
// CHECK: gpu.func @select_stage2_score_tiles_wgmma({{.*}}) workgroup(%[[SMEM:.*]] : memref<32768xi8, #gpu.address_space<workgroup>> {llvm.align = 1024 : i64}) kernel attributes {known_block_size = array<i32: 128, 1, 1>, nvvm.minctasm = 6 : i32}
//   [buffer, 64-column block, row, swizzled 16-byte chunk, 8]
// CHECK: %[[QT:.*]] = memref.view %[[SMEM]][%{{.*}}][] : {{.*}} to memref<1x2x64x8x8xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[KT:.*]] = memref.view %[[SMEM]][%c16384][] : {{.*}} to memref<1x2x64x8x8xbf16, #gpu.address_space<workgroup>>
//   Descriptors: the shared address >> 4, leading 1, stride 1024 >> 4 =
//   64 (bits 32-45), 128-byte swizzle (bit 62): 1 << 16 | 64 << 32 | 1 << 62.
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[SMEM]]
// CHECK: arith.constant 4611686293305360384 : i64
//   The first tile's operands before the loop: its keys (no leaf staged
//   yet), then its queries (chunk c of row r lands at c ^ (r % 8)).
// CHECK: %[[NEWLEAF0:.*]] = arith.cmpi ne, %{{.*}}, %c-1 : index
// CHECK-NEXT: scf.if %[[NEWLEAF0]]
// CHECK: nvgpu.device_async_copy %arg1[{{.*}}], %[[KT]][{{.*}}], 8, %{{.*}} {bypassL1}
// CHECK: nvgpu.device_async_create_group
//   A thread's query chunks read their members' pairs (sortedPairs, %arg8)
//   all before the first copy is issued: the reads issue together and
//   chunks of one member share one (a read after a copy would be issued
//   again, the copy may write memory).
// CHECK: arith.xori
// CHECK: memref.load %arg8
// CHECK: nvgpu.device_async_copy %arg0[{{.*}}], %[[QT]][{{.*}}], 8, %{{.*}} {bypassL1}
// CHECK-NOT: memref.load
// CHECK: nvgpu.device_async_create_group
//   Each tile: its copies complete, then its product.
// CHECK: scf.for
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.wait.group 0
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// CHECK: nvvm.wgmma.fence.aligned
//   Eight k-steps of 16: 32 bytes apart in a 64-column block, the second
//   block 64 rows x 128 bytes on (512 in 16-byte units).
// CHECK: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK: %c2_i64
// CHECK: nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
// CHECK: %c512_i64
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
//   Every warp is done with both tiles: the next tile's keys (when its leaf
//   differs) and queries are copied before this tile's epilogue, so that
//   the copy runs under the exps.
// CHECK-NEXT: gpu.barrier
// CHECK: scf.if
// CHECK: arith.cmpi ne
// CHECK-NEXT: scf.if
// CHECK: nvgpu.device_async_copy %arg1[{{.*}}], %[[KT]]
// CHECK: memref.load %arg8
// CHECK: nvgpu.device_async_copy %arg0[{{.*}}], %[[QT]]
// CHECK-NOT: memref.load
// CHECK: nvgpu.device_async_create_group
// CHECK-NOT: nvgpu.device_async_copy
//   The epilogue reads the accumulators in registers: per row the LSE over
//   the quad (xor 1, 2), the 16 heads over the warp (xor 4, 8, 16).
// CHECK: llvm.extractvalue
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32
// CHECK: math.exp2
// CHECK: math.log2 {{.*}} fastmath<afn>
// CHECK: gpu.shuffle  xor %{{.*}}, %c4_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c8_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32
// CHECK: memref.store %{{.*}}, %arg9
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
// CHECK: gpu.func @select_final
func.func @prefill(%q: tensor<1x16x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                   %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x4096x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 4096, io_single_stage = 8192>}
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}
