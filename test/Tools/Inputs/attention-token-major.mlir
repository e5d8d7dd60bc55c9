// Token-major sparse attention with a query offset: the library bounds the
// offset by the token dimensions (dim 1), offset + Nq <= N.
func.func @attend(%q: tensor<1x10x4x32xbf16>, %k: tensor<1x200x2x32xbf16>,
                  %v: tensor<1x200x2x32xbf16>, %s: tensor<1x10x2x4xi32>,
                  %off: index) -> tensor<1x10x4x32xbf16> {
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 32 {token_major}
      : tensor<1x10x4x32xbf16>, tensor<1x200x2x32xbf16>, tensor<1x200x2x32xbf16>,
        tensor<1x10x2x4xi32> -> tensor<1x10x4x32xbf16>, tensor<1x10x4xf32>
  return %o : tensor<1x10x4x32xbf16>
}
