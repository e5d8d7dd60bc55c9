// Inputs the fuzzer (tools/pisa-opt-fuzzer, docs/testing.md) found that
// crashed or hit undefined behaviour, each now a verifier error.
// RUN: pisa-opt %s -split-input-file -verify-diagnostics

// ceil(N / C) overflowed int64 (UBSan: signed integer overflow).
func.func @f(%k: tensor<1x1x200x64xf16>) {
  // expected-error @+1 {{expected block size C in [1, 1048576] but got 9223372036854775807}}
  %p = pisa.pyramid_build %k block_size = 9223372036854775807 branching = 2 : tensor<1x1x200x64xf16> -> tensor<1x1x7x64xf32>
  return
}

// -----

// A level far past any pyramid: the CPU lowering looped level - 2 times to
// size its children (the CI fuzz run's timeout, level = 2^63 - 1).
func.func @score(%q: tensor<1x4x16x32xf32>, %c: tensor<1x2x9x32xf32>,
                 %n: tensor<1x2x16x4xi32>, %off: index) -> tensor<1x2x16x4xf32> {
  // expected-error @+1 {{expected a level whose children cover at most 2^31 - 1 keys (C g^(level - 2)) but got level 9223372036854775807}}
  %u = pisa.lse_score %q, %c, %n, %off level = 9223372036854775807 block_size = 8 branching = 3
      : tensor<1x4x16x32xf32>, tensor<1x2x9x32xf32>, tensor<1x2x16x4xi32>
      -> tensor<1x2x16x4xf32>
  return %u : tensor<1x2x16x4xf32>
}

// -----

// A constant query offset of 2^63 - 1: the verifier's offset + Nq <= N
// overflowed int64 (UBSan, the sixteenth session's fuzz run).
func.func @offset(%q: tensor<1x2x100x32xf32>, %k: tensor<1x1x100x32xf32>, %p: tensor<1x1x3x32xf32>) -> tensor<1x1x100x8xi32> {
  %off = arith.constant 9223372036854775807 : index
  // expected-error @+1 {{expected query_offset (9223372036854775807) + Nq (100) <= N (100)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<1x2x100x32xf32>, tensor<1x1x100x32xf32>, tensor<1x1x3x32xf32> -> tensor<1x1x100x8xi32>
  return %s : tensor<1x1x100x8xi32>
}
