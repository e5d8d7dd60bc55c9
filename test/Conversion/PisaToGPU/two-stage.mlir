// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels=chip=sm_90 --convert-pisa-to-gpu=chip=sm_90 | FileCheck %s --enable-var-scope

// Prefill at the paper's setting (N = 4096, C = 64: 64 leaves, g*K = 16),
// built for sm_90 (no wgmma; two-stage-wgmma.mlir has sm_90a's stage 2):
// six kernels, stage-2 key tiles in shared memory, and no buffer shaped
// Nq x (number of leaves).

// CHECK-LABEL: func.func @prefill
// CHECK-SAME: (%[[Q:.*]]: memref<1x16x4096x128xbf16>, %[[K:.*]]: memref<1x1x4096x128xbf16>, %[[P:.*]]: memref<1x1x127x128xf32>, %[[OFF:.*]]: index)
//   Every buffer is device memory; the result is returned, not freed.
// CHECK-NOT: memref.alloc
// CHECK: %[[SEL:.*]] = gpu.alloc () : memref<1x1x4096x8xi32>
//   The tensor-core walk reads the pyramid as bf16 fragment planes
//   (127 rows of 2 x 128), written by one small kernel first.
// CHECK: %[[PLANES:.*]] = gpu.alloc () : memref<1x1x127x256xbf16>
// CHECK: gpu.launch_func @pisa_kernels::@pyramid_mma_planes blocks in ({{%c16(_[0-9]+)?}}, {{.*}} threads in ({{%c256(_[0-9]+)?}}, {{.*}} args(%[[P]] : memref<1x1x127x128xf32>, %[[PLANES]] : memref<1x1x127x256xbf16>)
// CHECK: %[[CONT:.*]] = gpu.alloc () : memref<1x1x4096x16xi32>
// CHECK: %[[COUNT:.*]] = gpu.alloc () : memref<1x1x4096xi32>
// CHECK: gpu.launch_func @pisa_kernels::@select_stage1_walk {{.*}} args(%[[Q]] : {{.*}}, %[[PLANES]] : {{.*}}, %[[OFF]] : index, %[[CONT]] : {{.*}}, %[[COUNT]] :
// CHECK: %[[LEAFCOUNT:.*]] = gpu.alloc () : memref<1x1x64xi32>
// CHECK: gpu.memset %[[LEAFCOUNT]]
// CHECK: gpu.launch_func @pisa_kernels::@select_stage2_histogram
// CHECK: gpu.launch_func @pisa_kernels::@select_stage2_scan
// CHECK: gpu.launch_func @pisa_kernels::@select_stage2_scatter
// CHECK: %[[SCORES:.*]] = gpu.alloc () : memref<1x1x4096x16xf32>
//   Up to 16384 + 64 tiles, 8 per block: 2056 blocks of 64 threads.
// CHECK: gpu.launch_func @pisa_kernels::@select_stage2_score_tiles_mma blocks in ({{%c2056(_[0-9]+)?}}, {{.*}} threads in ({{%c64(_[0-9]+)?}}
// CHECK-SAME: args(%[[Q]] : {{.*}}, %[[K]] :
// CHECK: gpu.launch_func @pisa_kernels::@select_final {{.*}} args(%[[OFF]] : index, %[[CONT]] : {{.*}}, %[[COUNT]] : {{.*}}, %[[SCORES]] : {{.*}}, %[[SEL]] :
// CHECK-DAG: gpu.dealloc %[[CONT]]
// CHECK-DAG: gpu.dealloc %[[PLANES]]
// CHECK-DAG: gpu.dealloc %[[SCORES]]
// CHECK-NOT: gpu.dealloc %[[SEL]]
// CHECK: return %[[SEL]]

// CHECK: gpu.module @pisa_kernels
//   Planes: thread i writes row i / 32, k-step (i / 4) % 8, lane group i % 4:
//   the high halves of elements 16 s + 2 t + {0, 1, 8, 9}, then the low
//   halves (x - high), as one 16-byte store at 32 s + 8 t.
// CHECK: gpu.func @pyramid_mma_planes(%{{.*}}: memref<1x1x127x128xf32>, %{{.*}}: memref<1x1x127x256xbf16>) kernel
// CHECK: %[[X0:.*]] = vector.load {{.*}} : memref<1x1x127x128xf32>, vector<2xf32>
// CHECK: %[[H0:.*]] = arith.truncf %[[X0]] : vector<2xf32> to vector<2xbf16>
// CHECK: %[[E0:.*]] = arith.extf %[[H0]]
// CHECK: %[[R0:.*]] = arith.subf %[[X0]], %[[E0]]
// CHECK: %[[L0:.*]] = arith.truncf %[[R0]]
// CHECK: %[[X1:.*]] = vector.load {{.*}} : memref<1x1x127x128xf32>, vector<2xf32>
// CHECK: %[[H1:.*]] = arith.truncf %[[X1]]
// CHECK: %[[L1:.*]] = arith.truncf
// CHECK: %[[HI:.*]] = vector.shuffle %[[H0]], %[[H1]] [0, 1, 2, 3]
// CHECK: %[[LO:.*]] = vector.shuffle %[[L0]], %[[L1]] [0, 1, 2, 3]
// CHECK: %[[PACK:.*]] = vector.shuffle %[[HI]], %[[LO]] [0, 1, 2, 3, 4, 5, 6, 7]
// CHECK: vector.store %[[PACK]], {{.*}} {alignment = 16 : i64} : memref<1x1x127x256xbf16>, vector<8xbf16>
// CHECK: gpu.func @select_stage1_walk(%{{.*}}: memref<1x16x4096x128xbf16>, %{{.*}}: memref<1x1x127x256xbf16>, %{{.*}}: index, %{{.*}}: memref<1x1x4096x16xi32>, %{{.*}}: memref<1x1x4096xi32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>, nvvm.minctasm = 8 : i32}
//   The walk keeps one candidate per lane and scores each ranked level on
//   tensor cores: the query's A fragments (bf16 pairs) once; per level the
//   causal prefix by ballot, each candidate child's high and low halves of
//   a k-step in one 16-byte load from the planes (two mma.sync per k-step),
//   ranks by index shuffles, the kept set by ballot. No private arrays are
//   touched, and the kernel has none (no private attributions).
// CHECK: vector.load %arg0{{.*}} {alignment = 4 : i64} : memref<1x16x4096x128xbf16>, vector<2xbf16>
// CHECK: nvvm.vote.sync  ballot
// CHECK: math.ctpop
// CHECK: vector.load %arg1{{.*}} {alignment = 16 : i64} : memref<1x1x127x256xbf16>, vector<8xbf16>
// CHECK: vector.shuffle {{.*}} [0, 1] : vector<8xbf16>, vector<8xbf16>
// CHECK: nvgpu.mma.sync
// CHECK-SAME: {mmaShape = [16, 8, 16]} : (vector<4x2xbf16>, vector<2x2xbf16>, vector<2x2xf32>) -> vector<2x2xf32>
// CHECK: gpu.shuffle  xor
// CHECK: gpu.shuffle  idx
// CHECK-NOT: memref.load %arg5
// CHECK: gpu.func @select_stage2_histogram
// CHECK: memref.atomic_rmw addi
// CHECK: gpu.func @select_stage2_scan
// CHECK: gpu.func @select_stage2_scatter
// CHECK: memref.atomic_rmw addi
//   bf16: one block of 2 warps scores 8 consecutive tiles of <= 4 queries
//   x 16 heads (64 rows, 32 per warp). The tile's query rows and the leaf's
//   C x d keys are staged in 16-byte chunks into one workgroup buffer (rows
//   padded to 136), each warp states its 32 x 64 x 128 tile product as a
//   vector.contract between transfer_reads of the staged tiles
//   (--pisa-vector-to-mma-sync takes it to tensor cores). With G = 16 each
//   warp's rows are two whole queries, so the LSEs and head sums are vector
//   ops on the product itself, which that pass keeps in the mma registers:
//   no score tile, no barrier after the product. Six blocks fit an SM's
//   shared memory; minctasm tells ptxas so.
// CHECK: gpu.func @select_stage2_score_tiles_mma({{.*}}) workgroup(%[[SMEM:.*]] : memref<34816xi8, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel attributes {known_block_size = array<i32: 64, 1, 1>, nvvm.minctasm = 6 : i32}
// CHECK: %[[QT:.*]] = memref.view %[[SMEM]][%{{.*}}][] : memref<34816xi8, #gpu.address_space<workgroup>> to memref<64x136xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[KT:.*]] = memref.view %[[SMEM]][%c17408][] : {{.*}} to memref<64x136xbf16, #gpu.address_space<workgroup>>
// CHECK-NOT: memref.view
//   A block scores its tiles in turn and stages a leaf's keys only when the
//   leaf changes.
// CHECK: scf.for {{.*}} iter_args(%[[STAGED:.*]] = %{{.*}}) -> (index)
// CHECK-NEXT: gpu.barrier
// CHECK: vector.load %arg0{{.*}} {alignment = 16 : i64} : memref<1x16x4096x128xbf16>, vector<8xbf16>
// CHECK: vector.store %{{.*}}, %[[QT]]
// CHECK: %[[NEWLEAF:.*]] = arith.cmpi ne, %{{.*}}, %[[STAGED]] : index
// CHECK-NEXT: scf.if %[[NEWLEAF]]
// CHECK: vector.load %arg1{{.*}} {alignment = 16 : i64} : memref<1x1x4096x128xbf16>, vector<8xbf16>
// CHECK: vector.store %{{.*}}, %[[KT]]
// CHECK: gpu.barrier
// CHECK: %[[A:.*]] = vector.transfer_read %[[QT]][%{{.*}}, %{{.*}}], %{{.*}} {in_bounds = [true, true]} : {{.*}}, vector<32x128xbf16>
// CHECK: %[[B:.*]] = vector.transfer_read %[[KT]][%{{.*}}, %{{.*}}], %{{.*}} {in_bounds = [true, true]} : {{.*}}, vector<64x128xbf16>
// CHECK: %[[P:.*]] = vector.contract {indexing_maps = [#[[MA:.*]], #[[MB:.*]], #[[MC:.*]]], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %[[A]], %[[B]], %{{.*}} : vector<32x128xbf16>, vector<64x128xbf16> into vector<32x64xf32>
//   Base 2, the scale times log2(e) folded into one multiply; no key mask
//   (contenders are leaves <= b_t - 2, every key visible).
// CHECK: %[[L:.*]] = arith.mulf %[[P]], %{{.*}} : vector<32x64xf32>
// CHECK: %[[M:.*]] = vector.multi_reduction <maximumf>, %[[L]], %{{.*}} [1] : vector<32x64xf32> to vector<32xf32>
// CHECK: %[[MC:.*]] = vector.shape_cast %[[M]] : vector<32xf32> to vector<32x1xf32>
// CHECK: %[[MB:.*]] = vector.broadcast %[[MC]] : vector<32x1xf32> to vector<32x64xf32>
// CHECK: %[[D:.*]] = arith.subf %[[L]], %[[MB]] : vector<32x64xf32>
// CHECK: %[[E:.*]] = math.exp2 %[[D]] fastmath<afn> : vector<32x64xf32>
// CHECK: %[[Z:.*]] = vector.multi_reduction <add>, %[[E]], %{{.*}} [1] : vector<32x64xf32> to vector<32xf32>
// CHECK: %[[LZ:.*]] = math.log2 %[[Z]] fastmath<afn> : vector<32xf32>
// CHECK: %[[LSE:.*]] = arith.addf %[[M]], %[[LZ]] : vector<32xf32>
// CHECK: %[[H0:.*]] = vector.extract_strided_slice %[[LSE]] {offsets = [0], sizes = [16], strides = [1]}
// CHECK: vector.reduction <add>, %[[H0]] : vector<16xf32> into f32
// CHECK: memref.store %{{.*}}, %arg9
// CHECK: %[[H1:.*]] = vector.extract_strided_slice %[[LSE]] {offsets = [16], sizes = [16], strides = [1]}
// CHECK: vector.reduction <add>, %[[H1]] : vector<16xf32> into f32
// CHECK: memref.store %{{.*}}, %arg9
// CHECK-NOT: gpu.barrier
// CHECK: scf.yield
// CHECK: gpu.func @select_final
// CHECK-NOT: x4096x64x
// CHECK-NOT: memref<4096x64x
func.func @prefill(%q: tensor<1x16x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                   %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x4096x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 4096, io_single_stage = 8192>}
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}

