// The backward of sparse attention over dynamic B, N and Nq, batched and
// packed: its scratch (the query lists, the segments' sums) grows linearly
// with N and Nq.
func.func @grad(%q: tensor<?x1x?x32xbf16>, %k: tensor<?x1x?x32xbf16>, %v: tensor<?x1x?x32xbf16>, %s: tensor<?x1x?x4xi32>, %off: index, %o: tensor<?x1x?x32xbf16>, %l: tensor<?x1x?xf32>, %do: tensor<?x1x?x32xbf16>) -> tensor<?x1x?x32xf32> {
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 32 : tensor<?x1x?x32xbf16>, tensor<?x1x?x32xbf16>, tensor<?x1x?x32xbf16>, tensor<?x1x?x4xi32>, tensor<?x1x?x32xbf16>, tensor<?x1x?xf32>, tensor<?x1x?x32xbf16> -> tensor<?x1x?x32xf32>, tensor<?x1x?x32xf32>, tensor<?x1x?x32xf32>
  return %dk : tensor<?x1x?x32xf32>
}
func.func @grad_packed(%q: tensor<?x1x32xbf16>, %k: tensor<?x1x32xbf16>, %v: tensor<?x1x32xbf16>, %s: tensor<?x1x4xi32>, %cuq: tensor<?xi32>, %cuk: tensor<?xi32>, %o: tensor<?x1x32xbf16>, %l: tensor<?x1xf32>, %do: tensor<?x1x32xbf16>) -> tensor<?x1x32xf32> {
  %dq, %dk, %dv = pisa.sparse_attention_grad_varlen %q, %k, %v, %s cu_seqlens(%cuq, %cuk) out(%o, %l) grad(%do) block_size = 32 : tensor<?x1x32xbf16>, tensor<?x1x32xbf16>, tensor<?x1x32xbf16>, tensor<?x1x4xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x1x32xbf16>, tensor<?x1xf32>, tensor<?x1x32xbf16> -> tensor<?x1x32xf32>, tensor<?x1x32xf32>, tensor<?x1x32xf32>
  return %dk : tensor<?x1x32xf32>
}
