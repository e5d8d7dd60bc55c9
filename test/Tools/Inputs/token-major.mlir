// A token-major selection library (pisa-compile.test): Q [B, Nq, 16, 128], K [B, N, 1, 128], result [B, Nq, 1, 8].
func.func @select(%q: tensor<?x?x16x128xbf16>, %k: tensor<?x?x1x128xbf16>, %off: index) -> tensor<?x?x1x8xi32> attributes {llvm.emit_c_interface} {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2 {token_major} : tensor<?x?x1x128xbf16> -> tensor<?x1x?x128xf32>
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2 {token_major}
      : tensor<?x?x16x128xbf16>, tensor<?x?x1x128xbf16>, tensor<?x1x?x128xf32> -> tensor<?x?x1x8xi32>
  return %s : tensor<?x?x1x8xi32>
}
