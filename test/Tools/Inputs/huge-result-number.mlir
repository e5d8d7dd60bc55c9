// A result number MLIR 22's parser would size a table by (32 GiB):
// pisa-compile refuses it before parsing (include/pisa/Support/ParserLimits.h).
func.func private @two() -> (i32, i32)
func.func @f() -> i32 {
  %0:2 = func.call @two() : () -> (i32, i32)
  return %0#2147483647 : i32
}
