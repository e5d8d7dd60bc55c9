// linalg's list operands in custom form. MLIR 22's parser stores a null
// attribute and crashes when one of these lists does not parse; pisa-opt and
// pisa-compile refuse such text first (include/pisa/Support/ParserLimits.h).
// pisa-opt-unsafe-input.test substitutes BAD_* for a malformed list.
func.func @lists(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>, %c: tensor<2xf32>,
                 %dimensions: tensor<2x3xf32>) -> (tensor<3x2xf32>, tensor<2x3xf32>, tensor<2xf32>) {
  %t = linalg.transpose ins(%a : tensor<2x3xf32>) outs(%b : tensor<3x2xf32>) permutation = TRANSPOSE
  %x = linalg.broadcast ins(%c : tensor<2xf32>) outs(%dimensions : tensor<2x3xf32>) dimensions = BROADCAST
  %r = linalg.reduce ins(%a : tensor<2x3xf32>) outs(%c : tensor<2xf32>) dimensions = REDUCE
    (%u: f32, %v: f32) {
      %s = arith.addf %u, %v : f32
      linalg.yield %s : f32
    }
  return %t, %x, %r : tensor<3x2xf32>, tensor<2x3xf32>, tensor<2xf32>
}
