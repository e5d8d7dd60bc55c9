// pisa-compile refuses an entry point that returns one tensor twice: its two
// out-parameters would be one buffer (test/Tools/pisa-compile.test).
func.func @twice(%q: tensor<1x16x256x128xbf16>, %k: tensor<1x1x256x128xbf16>)
    -> (tensor<1x1x256x8xi32>, tensor<1x1x256x8xi32>) {
  %c0 = arith.constant 0 : index
  %p = pisa.pyramid_build %k block_size = 64 branching = 2
      : tensor<1x1x256x128xbf16> -> tensor<1x1x7x128xf32>
  %s = pisa.hier_topk %q, %k, %p, %c0 topk = 8 block_size = 64 branching = 2
      : tensor<1x16x256x128xbf16>, tensor<1x1x256x128xbf16>, tensor<1x1x7x128xf32>
      -> tensor<1x1x256x8xi32>
  return %s, %s : tensor<1x1x256x8xi32>, tensor<1x1x256x8xi32>
}
