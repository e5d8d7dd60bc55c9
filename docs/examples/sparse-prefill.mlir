// The whole sparse prefill as one program: the key pyramid, PISA's
// coarse-to-fine selection and attention over the selected blocks, for any
// batch, length and query offset (prefill or a chunk). The paper's setting:
// G = 16 query heads per KV head, d = dv = 128, C = 64, K = 8, g = 2, bf16.
// pisa-compile makes one GPU library of it (run-examples.sh does);
// pisa-cpu-pipeline runs it on the CPU.
func.func @sparse_prefill(%q: tensor<?x16x?x128xbf16>, %k: tensor<?x1x?x128xbf16>,
                          %v: tensor<?x1x?x128xbf16>, %offset: index)
    -> tensor<?x16x?x128xbf16> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2
      : tensor<?x1x?x128xbf16> -> tensor<?x1x?x128xf32>
  %sel = pisa.hier_topk %q, %k, %p, %offset topk = 8 block_size = 64 branching = 2
      : tensor<?x16x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x128xf32>
      -> tensor<?x1x?x8xi32>
  %o, %lse = pisa.sparse_attention %q, %k, %v, %sel, %offset block_size = 64
      : tensor<?x16x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x128xbf16>,
        tensor<?x1x?x8xi32> -> tensor<?x16x?x128xbf16>, tensor<?x16x?xf32>
  return %o : tensor<?x16x?x128xbf16>
}
