// RUN: pisa-opt %s -split-input-file -verify-diagnostics --allow-unregistered-dialect

// One case per verifier branch of every pisa op and attribute.

func.func @f(%k: tensor<1x1x200x64xf16>) {
  // expected-error @+1 {{expected block size C in [1, 1048576] but got 0}}
  %p = pisa.pyramid_build %k block_size = 0 branching = 2 : tensor<1x1x200x64xf16> -> tensor<1x1x7x64xf32>
  return
}

// -----

func.func @f(%k: tensor<1x1x200x64xf16>) {
  // expected-error @+1 {{expected branching g in [2, 64] but got 1}}
  %p = pisa.pyramid_build %k block_size = 64 branching = 1 : tensor<1x1x200x64xf16> -> tensor<1x1x7x64xf32>
  return
}

// -----

func.func @f(%k: tensor<1x1x200x64xf16>) {
  // expected-error @+1 {{expected B of pyramid (2) to match keys (1)}}
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 : tensor<1x1x200x64xf16> -> tensor<2x1x7x64xf32>
  return
}

// -----

func.func @f(%k: tensor<1x1x200x64xf16>) {
  // expected-error @+1 {{expected Hkv of pyramid (3) to match keys (1)}}
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 : tensor<1x1x200x64xf16> -> tensor<1x3x7x64xf32>
  return
}

// -----

func.func @f(%k: tensor<1x1x200x64xf16>) {
  // expected-error @+1 {{expected d of pyramid (32) to match keys (64)}}
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 : tensor<1x1x200x64xf16> -> tensor<1x1x7x32xf32>
  return
}

// -----

func.func @f(%k: tensor<1x1x200x64xf16>) {
  // expected-error @+1 {{expected pyramid to have 7 rows for N = 200, C = 64, g = 2 but got 8}}
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 : tensor<1x1x200x64xf16> -> tensor<1x1x8x64xf32>
  return
}

// -----

func.func @f(%k: tensor<1x1x0x64xf16>) {
  // expected-error @+1 {{expected N >= 1 keys but got 0}}
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 : tensor<1x1x0x64xf16> -> tensor<1x1x1x64xf32>
  return
}

// -----

func.func @f(%k: tensor<1x1x200x64xf64>) {
  // expected-error @+1 {{operand #0 must be 4D tensor of 32-bit float or 16-bit float or bfloat16 type values}}
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 : tensor<1x1x200x64xf64> -> tensor<1x1x7x64xf32>
  return
}

// -----

func.func @f(%k: tensor<1x1x200x64xf16>) {
  // expected-error @+1 {{result #0 must be 4D tensor of 32-bit float values}}
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 : tensor<1x1x200x64xf16> -> tensor<1x1x7x64xf16>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x32xf32>, %ch: tensor<1x2x16x32xf32>, %cand: tensor<1x2x16x8xi32>, %off: index) {
  %m1 = arith.constant -1 : index
  // expected-error @+1 {{expected block size C in [1, 1048576] but got 0}}
  %u = pisa.lse_score %q, %ch, %cand, %off level = 1 block_size = 0 branching = 2 : tensor<1x4x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x8xi32> -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x32xf32>, %ch: tensor<1x2x16x32xf32>, %cand: tensor<1x2x16x8xi32>, %off: index) {
  %m1 = arith.constant -1 : index
  // expected-error @+1 {{expected branching g in [2, 64] but got 0}}
  %u = pisa.lse_score %q, %ch, %cand, %off level = 1 block_size = 64 branching = 0 : tensor<1x4x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x8xi32> -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x32xf32>, %ch: tensor<1x2x16x32xf32>, %cand: tensor<1x2x16x8xi32>, %off: index) {
  %m1 = arith.constant -1 : index
  // expected-error @+1 {{expected a finite positive scale but got -1}}
  %u = pisa.lse_score %q, %ch, %cand, %off level = 1 block_size = 64 branching = 2 scale = -1.0 : tensor<1x4x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x8xi32> -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x32xf32>, %ch: tensor<1x2x16x32xf32>, %cand: tensor<1x2x16x8xi32>, %off: index) {
  %m1 = arith.constant -1 : index
  // expected-error @+1 {{expected a finite positive scale but got INF}}
  %u = pisa.lse_score %q, %ch, %cand, %off level = 1 block_size = 64 branching = 2 scale = 0x7F800000 : tensor<1x4x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x8xi32> -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x32xf32>, %ch: tensor<1x2x16x32xf32>, %cand: tensor<1x2x16x8xi32>, %off: index) {
  %m1 = arith.constant -1 : index
  // expected-error @+1 {{expected level >= 1 but got 0}}
  %u = pisa.lse_score %q, %ch, %cand, %off level = 0 block_size = 64 branching = 2 : tensor<1x4x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x8xi32> -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x32xf32>, %ch: tensor<1x2x16x32xf16>, %cand: tensor<1x2x16x8xi32>, %off: index) {
  %m1 = arith.constant -1 : index
  // expected-error @+1 {{expected level-1 children (raw keys) to have the queries' element type 'f32' but got 'f16'}}
  %u = pisa.lse_score %q, %ch, %cand, %off level = 1 block_size = 64 branching = 2 : tensor<1x4x16x32xf32>, tensor<1x2x16x32xf16>, tensor<1x2x16x8xi32> -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x32xbf16>, %ch: tensor<1x2x4x32xbf16>, %cand: tensor<1x2x16x8xi32>, %off: index) {
  %m1 = arith.constant -1 : index
  // expected-error @+1 {{expected level-2 children (summaries) to be f32 but got 'bf16'}}
  %u = pisa.lse_score %q, %ch, %cand, %off level = 2 block_size = 64 branching = 2 : tensor<1x4x16x32xbf16>, tensor<1x2x4x32xbf16>, tensor<1x2x16x8xi32> -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x32xf32>, %ch: tensor<2x2x16x32xf32>, %cand: tensor<1x2x16x8xi32>, %off: index) {
  %m1 = arith.constant -1 : index
  // expected-error @+1 {{expected B of children (2) to match queries (1)}}
  %u = pisa.lse_score %q, %ch, %cand, %off level = 1 block_size = 64 branching = 2 : tensor<1x4x16x32xf32>, tensor<2x2x16x32xf32>, tensor<1x2x16x8xi32> -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x32xf32>, %ch: tensor<1x2x16x16xf32>, %cand: tensor<1x2x16x8xi32>, %off: index) {
  %m1 = arith.constant -1 : index
  // expected-error @+1 {{expected d of children (16) to match queries (32)}}
  %u = pisa.lse_score %q, %ch, %cand, %off level = 1 block_size = 64 branching = 2 : tensor<1x4x16x32xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x8xi32> -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x32xf32>, %ch: tensor<1x3x16x32xf32>, %cand: tensor<1x3x16x8xi32>, %off: index) {
  %m1 = arith.constant -1 : index
  // expected-error @+1 {{expected Hq (4) to be a multiple of Hkv (3)}}
  %u = pisa.lse_score %q, %ch, %cand, %off level = 1 block_size = 64 branching = 2 : tensor<1x4x16x32xf32>, tensor<1x3x16x32xf32>, tensor<1x3x16x8xi32> -> tensor<1x3x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x32xf32>, %ch: tensor<1x0x16x32xf32>, %cand: tensor<1x0x16x8xi32>, %off: index) {
  %m1 = arith.constant -1 : index
  // expected-error @+1 {{expected Hkv >= 1 but got 0}}
  %u = pisa.lse_score %q, %ch, %cand, %off level = 1 block_size = 64 branching = 2 : tensor<1x4x16x32xf32>, tensor<1x0x16x32xf32>, tensor<1x0x16x8xi32> -> tensor<1x0x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x32xf32>, %ch: tensor<1x2x16x32xf32>, %cand: tensor<1x2x15x8xi32>, %off: index) {
  %m1 = arith.constant -1 : index
  // expected-error @+1 {{expected Nq of candidates (15) to match the expected shape (16)}}
  %u = pisa.lse_score %q, %ch, %cand, %off level = 1 block_size = 64 branching = 2 : tensor<1x4x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x15x8xi32> -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x32xf32>, %ch: tensor<1x2x16x32xf32>, %cand: tensor<1x2x16x8xi32>, %off: index) {
  %m1 = arith.constant -1 : index
  // expected-error @+1 {{expected S of scores (4) to match the expected shape (8)}}
  %u = pisa.lse_score %q, %ch, %cand, %off level = 1 block_size = 64 branching = 2 : tensor<1x4x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x8xi32> -> tensor<1x2x16x4xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x32xf32>, %ch: tensor<1x2x16x32xf32>, %cand: tensor<1x2x16x8xi32>, %off: index) {
  %m1 = arith.constant -1 : index
  // expected-error @+1 {{expected Hkv of scores (1) to match the expected shape (2)}}
  %u = pisa.lse_score %q, %ch, %cand, %off level = 1 block_size = 64 branching = 2 : tensor<1x4x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x8xi32> -> tensor<1x1x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x32xf32>, %ch: tensor<1x2x16x32xf32>, %cand: tensor<1x2x16x8xi32>, %off: index) {
  %m1 = arith.constant -1 : index
  // expected-error @+1 {{expected query_offset >= 0 but got -1}}
  %u = pisa.lse_score %q, %ch, %cand, %m1 level = 1 block_size = 64 branching = 2 : tensor<1x4x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x8xi32> -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected block size C in [1, 1048576] but got 0}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 0 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x32xf32> -> tensor<1x2x200x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected branching g in [2, 64] but got 1}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 1 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x32xf32> -> tensor<1x2x200x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected a finite positive scale but got 0}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 scale = 0.0 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x32xf32> -> tensor<1x2x200x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected topk K in [3, 4096] (room for the forced blocks) but got 2}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 2 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x32xf32> -> tensor<1x2x200x2xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xbf16>, %p: tensor<1x2x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected queries and keys to have the same element type but got 'f16' and 'bf16'}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xbf16>, tensor<1x2x7x32xf32> -> tensor<1x2x200x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<3x2x200x32xf16>, %p: tensor<3x2x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected B of keys (3) to match queries (1)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<3x2x200x32xf16>, tensor<3x2x7x32xf32> -> tensor<3x2x200x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x64xf16>, %p: tensor<1x2x7x64xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected d of keys (64) to match queries (32)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x64xf16>, tensor<1x2x7x64xf32> -> tensor<1x2x200x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x12x200x32xf16>, %k: tensor<1x5x200x32xf16>, %p: tensor<1x5x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected Hq (12) to be a multiple of Hkv (5)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 : tensor<1x12x200x32xf16>, tensor<1x5x200x32xf16>, tensor<1x5x7x32xf32> -> tensor<1x5x200x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<2x2x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected B of pyramid (2) to match keys (1)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<2x2x7x32xf32> -> tensor<1x2x200x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x1x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected Hkv of pyramid (1) to match keys (2)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x1x7x32xf32> -> tensor<1x2x200x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x16xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected d of pyramid (16) to match keys (32)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x16xf32> -> tensor<1x2x200x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x6x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected pyramid to have 7 rows for N = 200, C = 64, g = 2 but got 6}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x6x32xf32> -> tensor<1x2x200x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected B of selection (2) to match queries (1)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x32xf32> -> tensor<2x2x200x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected Hkv of selection (1) to match keys (2)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x32xf32> -> tensor<1x1x200x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected Nq of selection (100) to match queries (200)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x32xf32> -> tensor<1x2x100x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected K of selection (4) to match topk (8)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x32xf32> -> tensor<1x2x200x4xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected query_offset >= 0 but got -1}}
  %s = pisa.hier_topk %q, %k, %p, %m1 topk = 8 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x32xf32> -> tensor<1x2x200x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{expected query_offset (5) + Nq (200) <= N (200)}}
  %s = pisa.hier_topk %q, %k, %p, %c5 topk = 8 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x32xf32> -> tensor<1x2x200x8xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{result #0 must be 4D tensor of 32-bit signless integer values}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x32xf32> -> tensor<1x2x200x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x32xf32>) {
  %off = arith.constant 0 : index
  %m1 = arith.constant -1 : index
  %c5 = arith.constant 5 : index
  // expected-error @+1 {{attribute 'schedule' failed to satisfy constraint}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 {schedule = 3 : i64} : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x32xf32> -> tensor<1x2x200x8xi32>
  return
}

// -----

// expected-error @+1 {{expected q_tile in [1, 1024] but got 0}}
"test.use"() {s = #pisa.schedule<two_stage, q_tile = 0, io_two_stage = 1, io_single_stage = 2>} : () -> ()

// -----

// expected-error @+1 {{expected non-negative IO figures but got -1 and 2}}
"test.use"() {s = #pisa.schedule<two_stage, q_tile = 1, io_two_stage = -1, io_single_stage = 2>} : () -> ()

// -----

// expected-error @+2 {{expected ::mlir::pisa::ScheduleKind to be one of: two_stage, single_stage}}
// expected-error @+1 {{failed to parse Pisa_ScheduleAttr parameter 'kind'}}
"test.use"() {s = #pisa.schedule<three_stage, q_tile = 1, io_two_stage = 1, io_single_stage = 2>} : () -> ()

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x32xf32>) {
  %off = arith.constant 0 : index
  // expected-error @+1 {{expected topk K in [3, 4096] (room for the forced blocks) but got 1000000000}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 1000000000 block_size = 64 branching = 2 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x32xf32> -> tensor<1x2x200x1000000000xi32>
  return
}

// -----

func.func @f(%k: tensor<1x2x200x32xf16>) {
  // expected-error @+1 {{expected branching g in [2, 64] but got 65}}
  %p = pisa.pyramid_build %k block_size = 64 branching = 65 : tensor<1x2x200x32xf16> -> tensor<1x2x5x32xf32>
  return
}

// -----

// Heads, d and K stay static; B, N, Nq and the pyramid rows may be dynamic.
func.func @f(%k: tensor<1x?x200x32xf16>) {
  // expected-error @+1 {{expected a static Hkv (dim 1) in keys but got 'tensor<1x?x200x32xf16>'}}
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 : tensor<1x?x200x32xf16> -> tensor<1x?x7x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x4x?x?xf16>, %k: tensor<?x2x?x32xf16>, %p: tensor<?x2x?x32xf32>, %off: index) {
  // expected-error @+1 {{expected a static d (dim 3) in queries but got 'tensor<?x4x?x?xf16>'}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 64 branching = 2 : tensor<?x4x?x?xf16>, tensor<?x2x?x32xf16>, tensor<?x2x?x32xf32> -> tensor<?x2x?x4xi32>
  return
}

// -----

func.func @f(%q: tensor<?x4x?x32xf16>, %k: tensor<?x2x?x32xf16>, %p: tensor<?x2x?x32xf32>, %off: index) {
  // expected-error @+1 {{expected a static K (dim 3) in selection but got 'tensor<?x2x?x?xi32>'}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 64 branching = 2 : tensor<?x4x?x32xf16>, tensor<?x2x?x32xf16>, tensor<?x2x?x32xf32> -> tensor<?x2x?x?xi32>
  return
}

// -----

func.func @f(%q: tensor<1x4x10x16xf16>, %k: tensor<1x2x10x16xf16>, %v: tensor<1x2x10x8xf32>, %s: tensor<1x2x10x3xi32>, %off: index) {
  // expected-error @+1 {{expected queries, keys, values and output to have one element type but got 'f16', 'f16', 'f32' and 'f16'}}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 4 : tensor<1x4x10x16xf16>, tensor<1x2x10x16xf16>, tensor<1x2x10x8xf32>, tensor<1x2x10x3xi32> -> tensor<1x4x10x8xf16>, tensor<1x4x10xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x10x16xf16>, %k: tensor<1x2x10x16xf16>, %v: tensor<1x2x9x8xf16>, %s: tensor<1x2x10x3xi32>, %off: index) {
  // expected-error @+1 {{expected N of values (9) to match keys (10)}}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 4 : tensor<1x4x10x16xf16>, tensor<1x2x10x16xf16>, tensor<1x2x9x8xf16>, tensor<1x2x10x3xi32> -> tensor<1x4x10x8xf16>, tensor<1x4x10xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x10x16xf16>, %k: tensor<1x2x10x16xf16>, %v: tensor<1x2x10x8xf16>, %s: tensor<1x2x10x3xi32>, %off: index) {
  // expected-error @+1 {{expected dv of output (16) to match values (8)}}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 4 : tensor<1x4x10x16xf16>, tensor<1x2x10x16xf16>, tensor<1x2x10x8xf16>, tensor<1x2x10x3xi32> -> tensor<1x4x10x16xf16>, tensor<1x4x10xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x10x16xf16>, %k: tensor<1x2x10x16xf16>, %v: tensor<1x2x10x8xf16>, %s: tensor<1x2x10x3xi32>) {
  %off = arith.constant 1 : index
  // expected-error @+1 {{expected query_offset (1) + Nq (10) <= N (10)}}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 4 : tensor<1x4x10x16xf16>, tensor<1x2x10x16xf16>, tensor<1x2x10x8xf16>, tensor<1x2x10x3xi32> -> tensor<1x4x10x8xf16>, tensor<1x4x10xf32>
  return
}

// -----

// The cache is laid out for the key cache's capacity (4096 keys: 127 rows).
func.func @f(%k: tensor<4x2x4096x64xbf16>, %p: tensor<4x2x100x64xf32>, %from: tensor<4xi32>, %to: tensor<4xi32>) {
  // expected-error @+1 {{expected pyramid to have 127 rows for N = 4096, C = 64, g = 2 but got 100}}
  %r = pisa.pyramid_append %k, %p, %from, %to block_size = 64 branching = 2 : tensor<4x2x4096x64xbf16>, tensor<4x2x100x64xf32>, tensor<4xi32>, tensor<4xi32> -> tensor<4x2x100x64xf32>
  return
}

// -----

func.func @f(%k: tensor<4x2x4096x64xbf16>, %p: tensor<4x2x127x64xf32>, %from: tensor<3xi32>, %to: tensor<4xi32>) {
  // expected-error @+1 {{expected B of from (3) to match keys (4)}}
  %r = pisa.pyramid_append %k, %p, %from, %to block_size = 64 branching = 2 : tensor<4x2x4096x64xbf16>, tensor<4x2x127x64xf32>, tensor<3xi32>, tensor<4xi32> -> tensor<4x2x127x64xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x32xf32>, %off: index) {
  // expected-error @+1 {{expected capacity >= N (200) and >= 1 but got 100}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 64 branching = 2 capacity = 100 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x32xf32> -> tensor<1x2x200x4xi32>
  return
}

// -----

// With a capacity the pyramid has the capacity's rows (4096 keys: 127).
func.func @f(%q: tensor<1x4x200x32xf16>, %k: tensor<1x2x200x32xf16>, %p: tensor<1x2x7x32xf32>, %off: index) {
  // expected-error @+1 {{expected pyramid to have 127 rows for N = 4096, C = 64, g = 2 but got 7}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 64 branching = 2 capacity = 4096 : tensor<1x4x200x32xf16>, tensor<1x2x200x32xf16>, tensor<1x2x7x32xf32> -> tensor<1x2x200x4xi32>
  return
}

// -----

// Token-major: heads are dim 2, tokens dim 1.
func.func @f(%k: tensor<1x200x?x64xf16>) {
  // expected-error @+1 {{expected a static Hkv (dim 2) in keys}}
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 {token_major} : tensor<1x200x?x64xf16> -> tensor<1x2x7x64xf32>
  return
}

// -----

func.func @f(%q: tensor<1x200x4x64xf16>, %k: tensor<1x200x3x64xf16>, %p: tensor<1x3x7x64xf32>, %off: index) {
  // expected-error @+1 {{expected Hq (4) to be a multiple of Hkv (3)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 64 branching = 2 {token_major}
      : tensor<1x200x4x64xf16>, tensor<1x200x3x64xf16>, tensor<1x3x7x64xf32> -> tensor<1x200x3x4xi32>
  return
}

// -----

func.func @f(%q: tensor<1x200x6x64xf16>, %k: tensor<1x200x3x64xf16>, %p: tensor<1x3x7x64xf32>, %off: index) {
  // expected-error @+1 {{expected Hkv of selection (200) to match keys (3)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 64 branching = 2 {token_major}
      : tensor<1x200x6x64xf16>, tensor<1x200x3x64xf16>, tensor<1x3x7x64xf32> -> tensor<1x3x200x4xi32>
  return
}

// -----

// decode_select: the keys cache's capacity is static.
func.func @decode_dynamic_capacity(%q: tensor<2x4x1x32xf16>, %k: tensor<2x2x?x32xf16>, %p: tensor<2x2x127x32xf32>, %n: tensor<2xi32>) -> tensor<2x2x1x4xi32> {
  // expected-error @+1 {{expected a static capacity Ncap (dim 2) in keys but got 'tensor<2x2x?x32xf16>'}}
  %s = pisa.decode_select %q, %k, %p seq_lens(%n) topk = 4 block_size = 64 branching = 2 : tensor<2x4x1x32xf16>, tensor<2x2x?x32xf16>, tensor<2x2x127x32xf32>, tensor<2xi32> -> tensor<2x2x1x4xi32>
  return %s : tensor<2x2x1x4xi32>
}

// -----

// decode_select: one length per sequence.
func.func @decode_lengths(%q: tensor<2x4x1x32xf16>, %k: tensor<2x2x4096x32xf16>, %p: tensor<2x2x127x32xf32>, %n: tensor<3xi32>) -> tensor<2x2x1x4xi32> {
  // expected-error @+1 {{expected B of seq_lens (3) to match queries (2)}}
  %s = pisa.decode_select %q, %k, %p seq_lens(%n) topk = 4 block_size = 64 branching = 2 : tensor<2x4x1x32xf16>, tensor<2x2x4096x32xf16>, tensor<2x2x127x32xf32>, tensor<3xi32> -> tensor<2x2x1x4xi32>
  return %s : tensor<2x2x1x4xi32>
}

// -----

// decode_select: the pyramid is the capacity's layout (4096 keys: 127 rows).
func.func @decode_rows(%q: tensor<2x4x1x32xf16>, %k: tensor<2x2x4096x32xf16>, %p: tensor<2x2x7x32xf32>, %n: tensor<2xi32>) -> tensor<2x2x1x4xi32> {
  // expected-error @+1 {{127}}
  %s = pisa.decode_select %q, %k, %p seq_lens(%n) topk = 4 block_size = 64 branching = 2 : tensor<2x4x1x32xf16>, tensor<2x2x4096x32xf16>, tensor<2x2x7x32xf32>, tensor<2xi32> -> tensor<2x2x1x4xi32>
  return %s : tensor<2x2x1x4xi32>
}

// -----

// A paged cache's pyramid has the layout of Mp * S keys (128 x 16 = 2048:
// 63 rows).
func.func @paged_rows(%pages: tensor<64x16x2x32xf16>, %p: tensor<2x2x127x32xf32>, %from: tensor<2xi32>, %to: tensor<2xi32>, %bt: tensor<2x128xi32>) -> tensor<2x2x127x32xf32> {
  // expected-error @+1 {{63}}
  %r = pisa.pyramid_append %pages, %p, %from, %to block_table(%bt : tensor<2x128xi32>) block_size = 64 branching = 2 : tensor<64x16x2x32xf16>, tensor<2x2x127x32xf32>, tensor<2xi32>, tensor<2xi32> -> tensor<2x2x127x32xf32>
  return %r : tensor<2x2x127x32xf32>
}

// -----

func.func @paged_dynamic_page(%pages: tensor<64x?x2x32xf16>, %p: tensor<2x2x63x32xf32>, %from: tensor<2xi32>, %to: tensor<2xi32>, %bt: tensor<2x128xi32>) -> tensor<2x2x63x32xf32> {
  // expected-error @+1 {{expected a static page size S (dim 1) in keys but got 'tensor<64x?x2x32xf16>'}}
  %r = pisa.pyramid_append %pages, %p, %from, %to block_table(%bt : tensor<2x128xi32>) block_size = 64 branching = 2 : tensor<64x?x2x32xf16>, tensor<2x2x63x32xf32>, tensor<2xi32>, tensor<2xi32> -> tensor<2x2x63x32xf32>
  return %r : tensor<2x2x63x32xf32>
}

// -----

func.func @paged_dynamic_table(%q: tensor<2x4x1x32xf16>, %pages: tensor<64x16x2x32xf16>, %p: tensor<2x2x63x32xf32>, %n: tensor<2xi32>, %bt: tensor<2x?xi32>) -> tensor<2x2x1x4xi32> {
  // expected-error @+1 {{expected a static pages per sequence Mp (dim 1) in block_table but got 'tensor<2x?xi32>'}}
  %s = pisa.decode_select %q, %pages, %p seq_lens(%n) block_table(%bt : tensor<2x?xi32>) topk = 4 block_size = 64 branching = 2 : tensor<2x4x1x32xf16>, tensor<64x16x2x32xf16>, tensor<2x2x63x32xf32>, tensor<2xi32> -> tensor<2x2x1x4xi32>
  return %s : tensor<2x2x1x4xi32>
}

// -----

func.func @paged_batch(%q: tensor<2x4x1x32xf16>, %pages: tensor<64x16x2x32xf16>, %p: tensor<2x2x63x32xf32>, %n: tensor<2xi32>, %bt: tensor<3x128xi32>) -> tensor<2x2x1x4xi32> {
  // expected-error @+1 {{expected B of block_table (3) to match queries (2)}}
  %s = pisa.decode_select %q, %pages, %p seq_lens(%n) block_table(%bt : tensor<3x128xi32>) topk = 4 block_size = 64 branching = 2 : tensor<2x4x1x32xf16>, tensor<64x16x2x32xf16>, tensor<2x2x63x32xf32>, tensor<2xi32> -> tensor<2x2x1x4xi32>
  return %s : tensor<2x2x1x4xi32>
}

// -----

// Mp * S would overflow int64: refused, not computed.
func.func @paged_overflow(%pages: tensor<64x4611686018427387904x2x32xf16>, %p: tensor<2x2x63x32xf32>, %from: tensor<2xi32>, %to: tensor<2xi32>, %bt: tensor<2x4xi32>) -> tensor<2x2x63x32xf32> {
  // expected-error @+1 {{expected a page size S >= 1 and Mp >= 1 pages per sequence with Mp * S < 2^31 (i32 positions) but got S = 4611686018427387904, Mp = 4}}
  %r = pisa.pyramid_append %pages, %p, %from, %to block_table(%bt : tensor<2x4xi32>) block_size = 64 branching = 2 : tensor<64x4611686018427387904x2x32xf16>, tensor<2x2x63x32xf32>, tensor<2xi32>, tensor<2xi32> -> tensor<2x2x63x32xf32>
  return %r : tensor<2x2x63x32xf32>
}

// -----

func.func @attention_token_major_lse(%q: tensor<1x10x4x16xf32>, %k: tensor<1x200x2x16xf32>, %v: tensor<1x200x2x8xf32>, %s: tensor<1x10x2x4xi32>, %off: index) -> tensor<1x4x10xf32> {
  // Token-major lse is [B, Nq, Hq].
  // expected-error @+1 {{expected Hq of lse (10) to match queries (4)}}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 64 {token_major} : tensor<1x10x4x16xf32>, tensor<1x200x2x16xf32>, tensor<1x200x2x8xf32>, tensor<1x10x2x4xi32> -> tensor<1x10x4x8xf32>, tensor<1x4x10xf32>
  return %l : tensor<1x4x10xf32>
}

// -----

func.func @f(%q: tensor<1x4x10x16xf16>, %k: tensor<1x2x10x16xf16>, %v: tensor<1x2x10x8xf16>, %s: tensor<1x2x10x3xi32>, %o: tensor<1x4x10x8xf16>, %l: tensor<1x4x10xf32>, %do: tensor<1x4x10x8xf32>, %off: index) {
  // expected-error @+1 {{expected grad_output of the output's element type 'f16' but got 'f32'}}
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 4 : tensor<1x4x10x16xf16>, tensor<1x2x10x16xf16>, tensor<1x2x10x8xf16>, tensor<1x2x10x3xi32>, tensor<1x4x10x8xf16>, tensor<1x4x10xf32>, tensor<1x4x10x8xf32> -> tensor<1x4x10x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x10x16xf16>, %k: tensor<1x2x10x16xf16>, %v: tensor<1x2x10x8xf16>, %s: tensor<1x2x10x3xi32>, %o: tensor<1x4x10x8xf16>, %l: tensor<1x4x10xf32>, %do: tensor<1x4x9x8xf16>, %off: index) {
  // expected-error @+1 {{expected dimension 2 of grad_output (9) to match output (10)}}
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 4 : tensor<1x4x10x16xf16>, tensor<1x2x10x16xf16>, tensor<1x2x10x8xf16>, tensor<1x2x10x3xi32>, tensor<1x4x10x8xf16>, tensor<1x4x10xf32>, tensor<1x4x9x8xf16> -> tensor<1x4x10x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x10x16xf16>, %k: tensor<1x2x10x16xf16>, %v: tensor<1x2x10x8xf16>, %s: tensor<1x2x10x3xi32>, %o: tensor<1x4x10x8xf16>, %l: tensor<1x4x10xf32>, %do: tensor<1x4x10x8xf16>, %off: index) {
  // expected-error @+1 {{expected grad_queries of element type f32 or 'f16' (that of queries) but got 'bf16'}}
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 4 : tensor<1x4x10x16xf16>, tensor<1x2x10x16xf16>, tensor<1x2x10x8xf16>, tensor<1x2x10x3xi32>, tensor<1x4x10x8xf16>, tensor<1x4x10xf32>, tensor<1x4x10x8xf16> -> tensor<1x4x10x16xbf16>, tensor<1x2x10x16xf32>, tensor<1x2x10x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x10x16xf16>, %k: tensor<1x2x10x16xf16>, %v: tensor<1x2x10x8xf16>, %s: tensor<1x2x10x3xi32>, %o: tensor<1x4x10x8xf16>, %l: tensor<1x4x10xf32>, %do: tensor<1x4x10x8xf16>, %off: index) {
  // expected-error @+1 {{expected dimension 3 of grad_keys (8) to match keys (16)}}
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 4 : tensor<1x4x10x16xf16>, tensor<1x2x10x16xf16>, tensor<1x2x10x8xf16>, tensor<1x2x10x3xi32>, tensor<1x4x10x8xf16>, tensor<1x4x10xf32>, tensor<1x4x10x8xf16> -> tensor<1x4x10x16xf32>, tensor<1x2x10x8xf32>, tensor<1x2x10x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x10x16xf16>, %k: tensor<1x2x10x16xf16>, %v: tensor<1x2x10x8xf16>, %s: tensor<1x2x10x3xi32>, %o: tensor<1x4x10x8xf16>, %l: tensor<1x4x10xf32>, %do: tensor<1x4x10x8xf16>, %off: index) {
  // expected-error @+1 {{expected dimension 2 of grad_values (11) to match values (10)}}
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 4 : tensor<1x4x10x16xf16>, tensor<1x2x10x16xf16>, tensor<1x2x10x8xf16>, tensor<1x2x10x3xi32>, tensor<1x4x10x8xf16>, tensor<1x4x10xf32>, tensor<1x4x10x8xf16> -> tensor<1x4x10x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x11x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x10x16xf16>, %k: tensor<1x2x10x16xf16>, %v: tensor<1x2x10x8xf16>, %s: tensor<1x2x10x3xi32>, %o: tensor<1x4x10x8xf16>, %l: tensor<1x4x9xf32>, %do: tensor<1x4x10x8xf16>, %off: index) {
  // expected-error @+1 {{expected Nq of lse (9) to match queries (10)}}
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 4 : tensor<1x4x10x16xf16>, tensor<1x2x10x16xf16>, tensor<1x2x10x8xf16>, tensor<1x2x10x3xi32>, tensor<1x4x10x8xf16>, tensor<1x4x9xf32>, tensor<1x4x10x8xf16> -> tensor<1x4x10x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x10x16xf16>, %k: tensor<1x2x10x16xf16>, %v: tensor<1x2x10x8xf16>, %s: tensor<1x2x10x3xi32>, %o: tensor<1x4x10x16xf16>, %l: tensor<1x4x10xf32>, %do: tensor<1x4x10x16xf16>, %off: index) {
  // expected-error @+1 {{expected dv of output (16) to match values (8)}}
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 4 : tensor<1x4x10x16xf16>, tensor<1x2x10x16xf16>, tensor<1x2x10x8xf16>, tensor<1x2x10x3xi32>, tensor<1x4x10x16xf16>, tensor<1x4x10xf32>, tensor<1x4x10x16xf16> -> tensor<1x4x10x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x10x16xf16>, %k: tensor<1x2x10x16xf16>, %v: tensor<1x2x10x8xf16>, %s: tensor<1x2x10x3xi32>, %o: tensor<1x4x10x8xf16>, %l: tensor<1x4x10xf32>, %do: tensor<1x4x10x8xf16>, %off: index) {
  // expected-error @+1 {{expected block size C in [1, 1048576] but got 0}}
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 0 : tensor<1x4x10x16xf16>, tensor<1x2x10x16xf16>, tensor<1x2x10x8xf16>, tensor<1x2x10x3xi32>, tensor<1x4x10x8xf16>, tensor<1x4x10xf32>, tensor<1x4x10x8xf16> -> tensor<1x4x10x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x8xf32>
  return
}
