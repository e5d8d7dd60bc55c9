// RUN: pisa-opt %s --pisa-select-schedule | FileCheck %s --enable-var-scope
// RUN: pisa-opt %s --pisa-select-schedule="force=single-stage" | FileCheck %s --check-prefix=SINGLE --enable-var-scope
// RUN: pisa-opt %s --pisa-select-schedule="force=two-stage q-tile=8" | FileCheck %s --check-prefix=TWO --enable-var-scope
// RUN: pisa-opt %s --pisa-select-schedule="policy=refined" | FileCheck %s --check-prefix=REFINED --enable-var-scope

// Prefill at the paper's setting: G = 16, C = 64, Q_tile = 4, d = 128.
// 16 + 64/4 = 32 < 64: two-stage; IO = 16*128 + 64*128/4 and 64*128.
// CHECK-LABEL: func.func @prefill
// CHECK: pisa.hier_topk {{.*}} {schedule = #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 4096, io_single_stage = 8192>}
// SINGLE-LABEL: func.func @prefill
// SINGLE: #pisa.schedule<single_stage, q_tile = 4, io_two_stage = 4096, io_single_stage = 8192>
// TWO-LABEL: func.func @prefill
// TWO: #pisa.schedule<two_stage, q_tile = 8, io_two_stage = 3072, io_single_stage = 8192>
func.func @prefill(%q: tensor<1x16x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                   %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x4096x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}

// Decode: one query per sequence, single-stage whatever the IO figures say.
// CHECK-LABEL: func.func @decode
// CHECK: pisa.hier_topk {{.*}} {schedule = #pisa.schedule<single_stage, q_tile = 4, io_two_stage = 4096, io_single_stage = 8192>}
// TWO-LABEL: func.func @decode
// TWO: #pisa.schedule<two_stage, q_tile = 8
func.func @decode(%q: tensor<1x16x1x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                  %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x1x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<1x16x1x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x1x8xi32>
  return %s : tensor<1x1x1x8xi32>
}

// G = 64 = C: 64 + 16 >= 64, single-stage.
// CHECK-LABEL: func.func @large_group
// CHECK: #pisa.schedule<single_stage, q_tile = 4, io_two_stage = 10240, io_single_stage = 8192>
func.func @large_group(%q: tensor<1x64x256x128xf32>, %k: tensor<1x1x256x128xf32>,
                       %p: tensor<1x1x7x128xf32>, %off: index) -> tensor<1x1x256x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<1x64x256x128xf32>, tensor<1x1x256x128xf32>, tensor<1x1x7x128xf32>
      -> tensor<1x1x256x8xi32>
  return %s : tensor<1x1x256x8xi32>
}

// Two queries, G = 40: the paper's rule says 40 + 16 = 56 < 64 (two-stage);
// the refined policy caps Q_tile at 2: 40 + 32 = 72 >= 64 (single-stage).
// CHECK-LABEL: func.func @two_queries
// CHECK: #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 7168, io_single_stage = 8192>
// REFINED-LABEL: func.func @two_queries
// REFINED: #pisa.schedule<single_stage, q_tile = 4
func.func @two_queries(%q: tensor<1x40x2x128xf32>, %k: tensor<1x1x256x128xf32>,
                       %p: tensor<1x1x7x128xf32>, %off: index) -> tensor<1x1x2x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<1x40x2x128xf32>, tensor<1x1x256x128xf32>, tensor<1x1x7x128xf32>
      -> tensor<1x1x2x8xi32>
  return %s : tensor<1x1x2x8xi32>
}
