// A batched decode step over a paged key cache (vLLM's and FlashInfer's
// layout), paper setting: B sequences (any B) whose keys live in a pool of
// pages of S = 16 keys, [P, 16, Hkv, d] (any P), found through
// block_table [B, 8192] (so each sequence holds up to 131072 keys); the
// pyramid caches stay per sequence, [B, Hkv, 4095, d]. pisa.pyramid_append
// brings sequence b's cache from from[b] to to[b] keys in place, then
// pisa.decode_select selects the K = 8 leaf blocks of its last query over
// its to[b] keys. pisa_decode_paged_validate checks the lengths and that
// every page below a sequence's length is in the pool and named once.
func.func @decode_paged(%q: tensor<?x16x1x128xbf16>,
                        %pool: tensor<?x16x1x128xbf16>,
                        %pcache: tensor<?x1x4095x128xf32>,
                        %from: tensor<?xi32>, %to: tensor<?xi32>,
                        %block_table: tensor<?x8192xi32>)
    -> tensor<?x1x1x8xi32> {
  %p = pisa.pyramid_append %pool, %pcache, %from, %to
      block_table(%block_table : tensor<?x8192xi32>) block_size = 64 branching = 2
      : tensor<?x16x1x128xbf16>, tensor<?x1x4095x128xf32>, tensor<?xi32>,
        tensor<?xi32> -> tensor<?x1x4095x128xf32>
  %sel = pisa.decode_select %q, %pool, %p seq_lens(%to)
      block_table(%block_table : tensor<?x8192xi32>) topk = 8 block_size = 64
      branching = 2 : tensor<?x16x1x128xbf16>, tensor<?x16x1x128xbf16>,
      tensor<?x1x4095x128xf32>, tensor<?xi32> -> tensor<?x1x1x8xi32>
  return %sel : tensor<?x1x1x8xi32>
}
