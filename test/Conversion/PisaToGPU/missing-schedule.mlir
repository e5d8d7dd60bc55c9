// RUN: pisa-opt %s --pisa-decompose-to-kernels -verify-diagnostics

// The GPU lowering reads the schedule; without one it says which pass to run.
func.func @unscheduled(%q: tensor<1x2x8x4xf32>, %k: tensor<1x1x8x4xf32>,
                       %p: tensor<1x1x3x4xf32>, %off: index) -> tensor<1x1x8x3xi32> {
  // expected-error @+1 {{has no #pisa.schedule: run --pisa-select-schedule before --pisa-decompose-to-kernels}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 3 block_size = 4 branching = 2
      : tensor<1x2x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x3x4xf32> -> tensor<1x1x8x3xi32>
  return %s : tensor<1x1x8x3xi32>
}
