// Scores of given pyramid nodes (pisa.lse_score, docs/semantics.md
// section 2) for any batch, query count and candidate count: the leaves'
// scores from the raw keys (level 1) and the level-2 scores from the
// leaves' summaries. G = 16 query heads per KV head, d = 128, C = 64,
// g = 2: the paper's setting.
func.func @leaf_scores(%q: tensor<?x16x?x128xbf16>, %k: tensor<?x1x?x128xbf16>,
                       %nodes: tensor<?x1x?x?xi32>, %offset: index)
    -> tensor<?x1x?x?xf32> {
  %u = pisa.lse_score %q, %k, %nodes, %offset level = 1 block_size = 64
      branching = 2 : tensor<?x16x?x128xbf16>, tensor<?x1x?x128xbf16>,
      tensor<?x1x?x?xi32> -> tensor<?x1x?x?xf32>
  return %u : tensor<?x1x?x?xf32>
}

func.func @level2_scores(%q: tensor<?x16x?x128xbf16>,
                         %leaves: tensor<?x1x?x128xf32>,
                         %nodes: tensor<?x1x?x?xi32>, %offset: index)
    -> tensor<?x1x?x?xf32> {
  %u = pisa.lse_score %q, %leaves, %nodes, %offset level = 2 block_size = 64
      branching = 2 : tensor<?x16x?x128xbf16>, tensor<?x1x?x128xf32>,
      tensor<?x1x?x?xi32> -> tensor<?x1x?x?xf32>
  return %u : tensor<?x1x?x?xf32>
}
