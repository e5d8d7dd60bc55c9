// Sparse attention for training: the key pyramid, PISA's selection and
// attention over the selected blocks, token-major ([B, T, H, d], the
// layout a transformer's projections give) for any batch and length, in
// the paper's setting (G = 16, d = 128, C = 64, K = 8, g = 2, bf16).
// pisa-compile adds @attend_forward and @attend_backward, through which
// torch.ops.pisa.attend is differentiable (docs/gpu.md, "Training entry
// points"); @select is the same selection alone.
// python/training/retrieval_lm.py trains a small language model with it.
func.func @attend(%q: tensor<?x?x16x128xbf16>, %k: tensor<?x?x1x128xbf16>,
                  %v: tensor<?x?x1x128xbf16>, %offset: index)
    -> tensor<?x?x16x128xbf16> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 {token_major}
      : tensor<?x?x1x128xbf16> -> tensor<?x1x?x128xf32>
  %sel = pisa.hier_topk %q, %k, %p, %offset topk = 8 block_size = 64 branching = 2 {token_major}
      : tensor<?x?x16x128xbf16>, tensor<?x?x1x128xbf16>, tensor<?x1x?x128xf32>
      -> tensor<?x?x1x8xi32>
  %o, %lse = pisa.sparse_attention %q, %k, %v, %sel, %offset block_size = 64 {token_major}
      : tensor<?x?x16x128xbf16>, tensor<?x?x1x128xbf16>, tensor<?x?x1x128xbf16>,
        tensor<?x?x1x8xi32> -> tensor<?x?x16x128xbf16>, tensor<?x?x16xf32>
  return %o : tensor<?x?x16x128xbf16>
}

func.func @select(%q: tensor<?x?x16x128xbf16>, %k: tensor<?x?x1x128xbf16>,
                  %offset: index) -> tensor<?x?x1x8xi32> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 {token_major}
      : tensor<?x?x1x128xbf16> -> tensor<?x1x?x128xf32>
  %sel = pisa.hier_topk %q, %k, %p, %offset topk = 8 block_size = 64 branching = 2 {token_major}
      : tensor<?x?x16x128xbf16>, tensor<?x?x1x128xbf16>, tensor<?x1x?x128xf32>
      -> tensor<?x?x1x8xi32>
  return %sel : tensor<?x?x1x8xi32>
}
