// RUN: pisa-opt %s --pisa-add-backward-entries --split-input-file --verify-diagnostics

// The training entry points' names are taken: an error, nothing added.

// expected-error @below {{cannot add the training entry point @f_backward: a symbol of that name exists}}
func.func @f(%q: tensor<1x2x64x32xf16>, %k: tensor<1x1x64x32xf16>,
             %v: tensor<1x1x64x32xf16>, %s: tensor<1x1x64x2xi32>)
    -> tensor<1x2x64x32xf16> {
  %c0 = arith.constant 0 : index
  %o, %lse = pisa.sparse_attention %q, %k, %v, %s, %c0 block_size = 32
      : tensor<1x2x64x32xf16>, tensor<1x1x64x32xf16>, tensor<1x1x64x32xf16>,
        tensor<1x1x64x2xi32> -> tensor<1x2x64x32xf16>, tensor<1x2x64xf32>
  return %o : tensor<1x2x64x32xf16>
}
func.func private @f_backward()

// -----

// expected-error @below {{cannot add the training entry point @g_forward: a symbol of that name exists}}
func.func @g(%q: tensor<1x2x64x32xf16>, %k: tensor<1x1x64x32xf16>,
             %v: tensor<1x1x64x32xf16>, %s: tensor<1x1x64x2xi32>)
    -> tensor<1x2x64x32xf16> {
  %c0 = arith.constant 0 : index
  %o, %lse = pisa.sparse_attention %q, %k, %v, %s, %c0 block_size = 32
      : tensor<1x2x64x32xf16>, tensor<1x1x64x32xf16>, tensor<1x1x64x32xf16>,
        tensor<1x1x64x2xi32> -> tensor<1x2x64x32xf16>, tensor<1x2x64xf32>
  return %o : tensor<1x2x64x32xf16>
}
func.func @g_forward() {
  return
}
