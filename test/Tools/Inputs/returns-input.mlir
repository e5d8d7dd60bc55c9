// pisa-compile refuses an entry point whose result is not written by its
// kernels (here: it returns its input): nothing to turn into an
// out-parameter (test/Tools/pisa-compile.test).
func.func @ident(%x: tensor<1x1x8x8xi32>) -> tensor<1x1x8x8xi32> {
  return %x : tensor<1x1x8x8xi32>
}
