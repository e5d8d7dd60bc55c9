// Sparse attention with d = dv = 256 and C = 64: the forward has GPU
// kernels, the backward does not (its tiles need more shared memory than
// a block has).
func.func @attend256(%q: tensor<1x4x256x256xf16>, %k: tensor<1x1x256x256xf16>,
                     %v: tensor<1x1x256x256xf16>, %s: tensor<1x1x256x4xi32>)
    -> tensor<1x4x256x256xf16> {
  %c0 = arith.constant 0 : index
  %o, %lse = pisa.sparse_attention %q, %k, %v, %s, %c0 block_size = 64
      : tensor<1x4x256x256xf16>, tensor<1x1x256x256xf16>, tensor<1x1x256x256xf16>,
        tensor<1x1x256x4xi32> -> tensor<1x4x256x256xf16>, tensor<1x4x256xf32>
  return %o : tensor<1x4x256x256xf16>
}
