// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels="kernel-config=score_tiles:fma_exp2_every=4" | FileCheck %s --check-prefix=CONFIG --enable-var-scope
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels="kernel-config=score_tiles:fma_exp2_every=4" --convert-pisa-to-gpu > %t.asked
// RUN: FileCheck %s --input-file=%t.asked --enable-var-scope
// RUN: FileCheck %s --input-file=%t.asked --check-prefix=COUNT --enable-var-scope
// RUN: FileCheck %s --input-file=%t.asked --check-prefix=POLY --enable-var-scope
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu | FileCheck %s --check-prefix=MUFU --enable-var-scope

// Stage 2's wgmma epilogue asked for every fourth exponential of a row on
// the FMA pipes (kernel_config fma_exp2_every = 4): a lane holds 16 of a
// row's 64 products and two rows, so 8 of its 32 exponentials are
// fmaExp2's polynomial and 24 stay math.exp2 (MUFU). Unasked, all 32 are
// math.exp2 and no polynomial is built. The walk's leaf scorer shares the
// epilogue's row LSE (scaledRowLse2) and is not asked.

// CONFIG: pisa.kernel.score_tiles
// CONFIG-SAME: kernel_config = #pisa.kernel_config<variant = wgmma, threads = 128, tiles_per_block = 8, min_blocks_per_sm = 6, fma_exp2_every = 4>

// A row's first three exponents go to MUFU, the fourth to the polynomial:
// x clamped to -127, n = round(x) by adding 1.5 * 2^23 (0x4B400000),
// f = x - n, five fused multiply-adds from c5 down to c0 = 1, and 2^n from
// n's bits (n << 23 plus 127 << 23) times the polynomial, added to the
// row's sum.
// CHECK-LABEL: gpu.func @select_stage2_score_tiles_wgmma
// CHECK-COUNT-3: math.exp2 %{{.*}} fastmath<afn> : f32
// CHECK: %[[X:.*]] = math.fma %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: %[[LOW:.*]] = arith.constant -1.270000e+02 : f32
// CHECK-NEXT: %[[CLAMPED:.*]] = arith.maximumf %[[X]], %[[LOW]] : f32
// CHECK-NEXT: %[[ROUND:.*]] = arith.constant 0x4B400000 : f32
// CHECK-NEXT: %[[T:.*]] = arith.addf %[[CLAMPED]], %[[ROUND]] : f32
// CHECK-NEXT: %[[ROUND2:.*]] = arith.constant 0x4B400000 : f32
// CHECK-NEXT: %[[N:.*]] = arith.subf %[[T]], %[[ROUND2]] : f32
// CHECK-NEXT: %[[F:.*]] = arith.subf %[[CLAMPED]], %[[N]] : f32
// CHECK-NEXT: %[[C5:.*]] = arith.constant 0.00132647273 : f32
// CHECK-NEXT: %[[C4:.*]] = arith.constant 0.00967151299 : f32
// CHECK-NEXT: %[[P4:.*]] = math.fma %[[C5]], %[[F]], %[[C4]] : f32
// CHECK-NEXT: %[[C3:.*]] = arith.constant 0.0555073358 : f32
// CHECK-NEXT: %[[P3:.*]] = math.fma %[[P4]], %[[F]], %[[C3]] : f32
// CHECK-NEXT: %[[C2:.*]] = arith.constant 0.240222424 : f32
// CHECK-NEXT: %[[P2:.*]] = math.fma %[[P3]], %[[F]], %[[C2]] : f32
// CHECK-NEXT: %[[C1:.*]] = arith.constant 6.931470e-01 : f32
// CHECK-NEXT: %[[P1:.*]] = math.fma %[[P2]], %[[F]], %[[C1]] : f32
// CHECK-NEXT: %[[C0:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[P0:.*]] = math.fma %[[P1]], %[[F]], %[[C0]] : f32
// CHECK-NEXT: %[[TBITS:.*]] = arith.bitcast %[[T]] : f32 to i32
// CHECK-NEXT: %[[C23:.*]] = arith.constant 23 : i32
// CHECK-NEXT: %[[SHIFTED:.*]] = arith.shli %[[TBITS]], %[[C23]] : i32
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1065353216 : i32
// CHECK-NEXT: %[[BITS:.*]] = arith.addi %[[SHIFTED]], %[[ONE]] : i32
// CHECK-NEXT: %[[TWON:.*]] = arith.bitcast %[[BITS]] : i32 to f32
// CHECK-NEXT: %[[TERM:.*]] = arith.mulf %[[P0]], %[[TWON]] : f32
// CHECK-NEXT: arith.addf %{{.*}}, %[[TERM]] : f32

// COUNT-LABEL: gpu.func @select_stage1_walk
// COUNT-NOT: 0x4B400000
// COUNT-LABEL: gpu.func @select_stage2_score_tiles_wgmma
// COUNT-COUNT-24: math.exp2
// COUNT-NOT: math.exp2
// COUNT-LABEL: gpu.func @select_final
// POLY-LABEL: gpu.func @select_stage2_score_tiles_wgmma
// POLY-COUNT-8: arith.constant -1.270000e+02 : f32
// POLY-NOT: arith.constant -1.270000e+02 : f32
// POLY-LABEL: gpu.func @select_final

// MUFU-LABEL: gpu.func @select_stage2_score_tiles_wgmma
// MUFU-COUNT-32: math.exp2
// MUFU-NOT: math.exp2
// MUFU-NOT: 0x4B400000
// MUFU-LABEL: gpu.func @select_final
func.func @prefill(%q: tensor<1x16x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                   %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x4096x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 4096, io_single_stage = 8192>}
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}
