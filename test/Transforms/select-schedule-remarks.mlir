// RUN: pisa-opt %s --pisa-select-schedule="emit-remarks" -verify-diagnostics -split-input-file
// RUN: not pisa-opt %s --pisa-select-schedule="q-tile=0" -split-input-file 2>&1 | FileCheck %s --enable-var-scope --check-prefix=QTILE

// QTILE: expected q-tile in [1, 1024] but got 0
// RUN: not pisa-opt %s --pisa-select-schedule="q-tile=1025" -split-input-file 2>&1 | FileCheck %s --enable-var-scope --check-prefix=QTILEBIG
// QTILEBIG: expected q-tile in [1, 1024] but got 1025

func.func @prefill(%q: tensor<1x16x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                   %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x4096x8xi32> {
  // expected-remark @+2 {{two_stage: io_two_stage = 4096 elements (8192 B), io_single_stage = 8192 elements (16384 B) per query-candidate pair; G + C/Q_tile = 16 + 64/4 = 32 < C = 64: two-stage}}
  // expected-remark @+1 {{flat block selection would be cheaper: per query, flat block selection scores N/C = 64 block summaries and PISA at most 1118 rows (94 summaries on the walk + 16 leaves x 64 keys): flat selection does 17.4688x less work at this length; PISA's selection is kept}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}

// -----

func.func @decode(%q: tensor<1x16x1x128xf32>, %k: tensor<1x1x4096x128xf32>,
                  %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x1x8xi32> {
  // expected-remark @+2 {{single_stage: io_two_stage = 4096 elements (16384 B), io_single_stage = 8192 elements (32768 B) per query-candidate pair; one query per sequence (decode): no key tile is shared, single-stage}}
  // expected-remark @+1 {{flat block selection would be cheaper}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<1x16x1x128xf32>, tensor<1x1x4096x128xf32>, tensor<1x1x127x128xf32>
      -> tensor<1x1x1x8xi32>
  return %s : tensor<1x1x1x8xi32>
}

// -----

// Equality, 48 + 64/4 = 64: single-stage (the rule is strict).
func.func @equal(%q: tensor<1x48x64x16xf32>, %k: tensor<1x1x64x16xf32>,
                 %p: tensor<1x1x1x16xf32>, %off: index) -> tensor<1x1x64x4xi32> {
  // expected-remark @+2 {{single_stage: io_two_stage = 1024 elements (4096 B), io_single_stage = 1024 elements (4096 B) per query-candidate pair; G + C/Q_tile = 48 + 64/4 = 64 >= C = 64: single-stage}}
  // expected-remark @+1 {{flat block selection would be cheaper: per query, flat block selection scores N/C = 1 block summaries and PISA at most 64 rows}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 64 branching = 2
      {schedule = #pisa.schedule<two_stage, q_tile = 9, io_two_stage = 0, io_single_stage = 0>}
      : tensor<1x48x64x16xf32>, tensor<1x1x64x16xf32>, tensor<1x1x1x16xf32>
      -> tensor<1x1x64x4xi32>
  return %s : tensor<1x1x64x4xi32>
}

// -----

// Long enough for PISA to do less work than flat selection: no second remark.
func.func @long(%q: tensor<1x16x4x128xbf16>, %k: tensor<1x1x131072x128xbf16>,
                %p: tensor<1x1x4095x128xf32>, %off: index) -> tensor<1x1x4x8xi32> {
  // expected-remark @+1 {{two_stage: io_two_stage = 4096 elements}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<1x16x4x128xbf16>, tensor<1x1x131072x128xbf16>, tensor<1x1x4095x128xf32>
      -> tensor<1x1x4x8xi32>
  return %s : tensor<1x1x4x8xi32>
}
