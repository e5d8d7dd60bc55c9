// Selection over a packed batch of sequences of different lengths (varlen,
// docs/semantics.md section 7): Q [Tq, 16, 128] and K [Tk, 1, 128] bf16,
// token-major, with cu_seqlens_q and cu_seqlens_k [B + 1]; sequence b's
// queries are its last cu_q[b+1] - cu_q[b] positions, so prefill, chunks
// and decode mix in one call. One library serves every B, Tq and Tk. The
// paper's setting: G = 16, d = 128, C = 64, K = 8, g = 2.
func.func @select_varlen(%q: tensor<?x16x128xbf16>, %k: tensor<?x1x128xbf16>,
                         %cu_q: tensor<?xi32>, %cu_k: tensor<?xi32>)
    -> tensor<?x1x8xi32> {
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cu_k) block_size = 64 branching = 2
      : tensor<?x1x128xbf16>, tensor<?xi32> -> tensor<?x1x128xf32>
  %sel = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cu_q, %cu_k) topk = 8
      block_size = 64 branching = 2
      : tensor<?x16x128xbf16>, tensor<?x1x128xbf16>, tensor<?x1x128xf32>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x1x8xi32>
  return %sel : tensor<?x1x8xi32>
}
