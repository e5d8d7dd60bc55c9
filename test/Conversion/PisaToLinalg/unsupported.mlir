// RUN: pisa-opt %s --convert-pisa-to-linalg --split-input-file -verify-diagnostics

// The CPU reference needs static shapes: dynamic ones are a legalization
// error, never a crash or a silent pass-through.

func.func @dynamic_pyramid(%k: tensor<?x?x?x8xf32>) -> tensor<?x?x?x8xf32> {
  // expected-error @+1 {{failed to legalize operation 'pisa.pyramid_build' that was explicitly marked illegal}}
  %p = pisa.pyramid_build %k block_size = 8 branching = 4
      : tensor<?x?x?x8xf32> -> tensor<?x?x?x8xf32>
  return %p : tensor<?x?x?x8xf32>
}

// -----

func.func @dynamic_select(%q: tensor<1x2x?x8xf32>, %k: tensor<1x1x?x8xf32>,
                          %p: tensor<1x1x?x8xf32>, %off: index) -> tensor<1x1x?x3xi32> {
  // expected-error @+1 {{failed to legalize operation 'pisa.hier_topk' that was explicitly marked illegal}}
  %s = pisa.hier_topk %q, %k, %p, %off topk = 3 block_size = 8 branching = 2
      : tensor<1x2x?x8xf32>, tensor<1x1x?x8xf32>, tensor<1x1x?x8xf32> -> tensor<1x1x?x3xi32>
  return %s : tensor<1x1x?x3xi32>
}
