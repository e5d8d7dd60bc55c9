// Prefill selection at the paper's setting: every query of a 4096-token
// sequence picks K = 8 leaf blocks of C = 64 keys; G = 16 query heads share
// one KV head, d = 128.
func.func @prefill_select(%q: tensor<1x16x4096x128xbf16>,
                          %k: tensor<1x1x4096x128xbf16>) -> tensor<1x1x4096x8xi32>
    attributes {llvm.emit_c_interface} {
  %off = arith.constant 0 : index
  %p = pisa.pyramid_build %k block_size = 64 branching = 2
      : tensor<1x1x4096x128xbf16> -> tensor<1x1x127x128xf32>
  %sel = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x4096x8xi32>
  return %sel : tensor<1x1x4096x8xi32>
}
