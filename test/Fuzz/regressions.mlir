// Inputs the fuzzer (tools/pisa-opt-fuzzer, docs/testing.md) found that
// crashed or hit undefined behaviour, each now a verifier error.
// RUN: pisa-opt %s -split-input-file -verify-diagnostics

// ceil(N / C) overflowed int64 (UBSan: signed integer overflow).
func.func @f(%k: tensor<1x1x200x64xf16>) {
  // expected-error @+1 {{expected block size C in [1, 1048576] but got 9223372036854775807}}
  %p = pisa.pyramid_build %k block_size = 9223372036854775807 branching = 2 : tensor<1x1x200x64xf16> -> tensor<1x1x7x64xf32>
  return
}
