// RUN: pisa-opt %s --split-input-file --pisa-configure-kernels --convert-pisa-to-gpu -verify-diagnostics

// --pisa-configure-kernels --convert-pisa-to-gpu lowers kernel-level ops on buffers; anything else
// names the passes that come first.
func.func @op_level(%q: tensor<1x2x8x4xf32>, %k: tensor<1x1x8x4xf32>,
                    %p: tensor<1x1x3x4xf32>, %off: index) -> tensor<1x1x8x3xi32> {
  // expected-error @+1 {{expected kernel-level ops on buffers: run --pisa-decompose-to-kernels and bufferize first (pisa-lower-to-nvvm-pipeline does)}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 3 block_size = 4 branching = 2
      {schedule = #pisa.schedule<single_stage, q_tile = 1, io_two_stage = 0, io_single_stage = 0>}
      : tensor<1x2x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x3x4xf32> -> tensor<1x1x8x3xi32>
  return %s : tensor<1x1x8x3xi32>
}

// -----

func.func @tensor_form(%k: tensor<1x1x8x4xf32>) -> tensor<1x1x3x4xf32> {
  %e = tensor.empty() : tensor<1x1x3x4xf32>
  // expected-error @+1 {{expected the buffer form: bufferize first (one-shot-bufferize)}}
  %p = pisa.kernel.pyramid %k outs(%e) block_size = 4 branching = 2
      : tensor<1x1x8x4xf32>, tensor<1x1x3x4xf32> -> tensor<1x1x3x4xf32>
  return %p : tensor<1x1x3x4xf32>
}
