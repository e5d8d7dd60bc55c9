// Decode selection: the single query at position %t of a 4096-key cache
// picks K = 8 leaf blocks. One query per sequence: single-stage.
func.func @decode_select(%q: tensor<1x16x1x128xbf16>,
                         %k: tensor<1x1x4096x128xbf16>,
                         %p: tensor<1x1x127x128xf32>,
                         %t: index) -> tensor<1x1x1x8xi32>
    attributes {llvm.emit_c_interface} {
  %sel = pisa.hier_topk %q, %k, %p, %t topk = 8 block_size = 64 branching = 2
      : tensor<1x16x1x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x1x8xi32>
  return %sel : tensor<1x1x1x8xi32>
}
