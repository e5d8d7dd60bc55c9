// One decode step over a pyramid cache (issue 13), paper setting: the keys
// cache holds up to 131072 keys, of which keys from .. to - 1 were just
// written; pisa.pyramid_append brings the cache (the capacity's layout,
// updated in place) from `from` to `to` keys, and the query at position
// n - 1 selects its K = 8 leaf blocks over keys 0 .. n - 1 reading the
// cache (capacity = 131072): O(C d + g d log N) for the update and one
// block's walk for the selection, no pyramid rebuilt.
func.func @decode_step(%q: tensor<1x16x1x128xbf16>,
                       %kcache: tensor<1x1x131072x128xbf16>,
                       %pcache: tensor<1x1x4095x128xf32>,
                       %from: tensor<1xi32>, %to: tensor<1xi32>,
                       %n: index) -> tensor<1x1x1x8xi32> {
  %p = pisa.pyramid_append %kcache, %pcache, %from, %to block_size = 64
      branching = 2 : tensor<1x1x131072x128xbf16>, tensor<1x1x4095x128xf32>,
      tensor<1xi32>, tensor<1xi32> -> tensor<1x1x4095x128xf32>
  %k = tensor.extract_slice %kcache[0, 0, 0, 0] [1, 1, %n, 128] [1, 1, 1, 1]
      : tensor<1x1x131072x128xbf16> to tensor<1x1x?x128xbf16>
  %c1 = arith.constant 1 : index
  %t = arith.subi %n, %c1 : index
  %sel = pisa.hier_topk %q, %k, %p, %t topk = 8 block_size = 64 branching = 2
      capacity = 131072 : tensor<1x16x1x128xbf16>, tensor<1x1x?x128xbf16>,
      tensor<1x1x4095x128xf32> -> tensor<1x1x1x8xi32>
  return %sel : tensor<1x1x1x8xi32>
}
