// Selection for any batch, length and query count: one library serves every
// B, N, Nq and query offset (prefill, chunked prefill, decode). G = 16 query
// heads per KV head, d = 128, C = 64, K = 8, g = 2: the paper's setting.
func.func @select(%q: tensor<?x16x?x128xbf16>, %k: tensor<?x1x?x128xbf16>,
                  %offset: index) -> tensor<?x1x?x8xi32> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2
      : tensor<?x1x?x128xbf16> -> tensor<?x1x?x128xf32>
  %sel = pisa.hier_topk %q, %k, %p, %offset topk = 8 block_size = 64 branching = 2
      : tensor<?x16x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x128xf32>
      -> tensor<?x1x?x8xi32>
  return %sel : tensor<?x1x?x8xi32>
}
