// pisa.sparse_attention_grad with f16 results is its f32 gradient rounded
// once (docs/semantics.md, section 6.1): the same f16 q, k, v, dO and
// selection (padding, duplicates, unsorted rows) give dq, dk and dv as f32
// and as f16 results, and every f16 element equals its f32 one truncated
// (0 differ of 192, 96 and 96); a dk element is nonzero (1).
// RUN: pisa-opt %s --pisa-cpu-pipeline | %mlir_runner -e main -entry-point-result=void -shared-libs=%runner_shared_libs | FileCheck %s --enable-var-scope
// CHECK: {{^}}0{{$}}
// CHECK-NEXT: {{^}}0{{$}}
// CHECK-NEXT: {{^}}0{{$}}
// CHECK-NEXT: {{^}}1{{$}}

func.func private @printI64(i64)
func.func private @printNewline()

func.func @print(%v: i64) {
  call @printI64(%v) : (i64) -> ()
  call @printNewline() : () -> ()
  return
}

// Elements where truncf(a) != b.
func.func @differ(%a: tensor<1x?x?x8xf32>, %b: tensor<1x?x?x8xf16>) -> i64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  %h = tensor.dim %a, %c1 : tensor<1x?x?x8xf32>
  %n = tensor.dim %a, %c2 : tensor<1x?x?x8xf32>
  %r = scf.for %i = %c0 to %h step %c1 iter_args(%acc = %zero) -> i64 {
    %r2 = scf.for %j = %c0 to %n step %c1 iter_args(%acc2 = %acc) -> i64 {
      %r3 = scf.for %e = %c0 to %c8 step %c1 iter_args(%acc3 = %acc2) -> i64 {
        %x = tensor.extract %a[%c0, %i, %j, %e] : tensor<1x?x?x8xf32>
        %y = tensor.extract %b[%c0, %i, %j, %e] : tensor<1x?x?x8xf16>
        %xt = arith.truncf %x : f32 to f16
        %same = arith.cmpf oeq, %xt, %y : f16
        %d = arith.select %same, %zero, %one : i64
        %s = arith.addi %acc3, %d : i64
        scf.yield %s : i64
      }
      scf.yield %r3 : i64
    }
    scf.yield %r2 : i64
  }
  return %r : i64
}

func.func @main() {
  %off = arith.constant 0 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %fd = arith.constant 0.3 : f32
  %fa = arith.constant 0.9 : f32
  %fb = arith.constant 0.37 : f32
  %fc = arith.constant 1.3 : f32
  %fe = arith.constant 0.71 : f32
  %qe = tensor.empty() : tensor<1x4x6x8xf16>
  %q = linalg.generic {indexing_maps = [affine_map<(w, x, y, z) -> (w, x, y, z)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%qe : tensor<1x4x6x8xf16>) {
  ^bb0(%out: f16):
    %x = linalg.index 1 : index
    %y = linalg.index 2 : index
    %z = linalg.index 3 : index
    %x7 = arith.muli %x, %c7 : index
    %xy = arith.addi %x7, %y : index
    %xy8 = arith.muli %xy, %c8 : index
    %n = arith.addi %xy8, %z : index
    %ni = arith.index_cast %n : index to i64
    %nf = arith.sitofp %ni : i64 to f32
    %t = arith.mulf %nf, %fa : f32
    %t2 = arith.addf %t, %fd : f32
    %sn = math.sin %t2 : f32
    %h = arith.truncf %sn : f32 to f16
    linalg.yield %h : f16
  } -> tensor<1x4x6x8xf16>
  %ke = tensor.empty() : tensor<1x2x6x8xf16>
  %k = linalg.generic {indexing_maps = [affine_map<(w, x, y, z) -> (w, x, y, z)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%ke : tensor<1x2x6x8xf16>) {
  ^bb0(%out: f16):
    %x = linalg.index 1 : index
    %y = linalg.index 2 : index
    %z = linalg.index 3 : index
    %x7 = arith.muli %x, %c7 : index
    %xy = arith.addi %x7, %y : index
    %xy8 = arith.muli %xy, %c8 : index
    %n = arith.addi %xy8, %z : index
    %ni = arith.index_cast %n : index to i64
    %nf = arith.sitofp %ni : i64 to f32
    %t = arith.mulf %nf, %fb : f32
    %t2 = arith.addf %t, %fd : f32
    %sn = math.sin %t2 : f32
    %h = arith.truncf %sn : f32 to f16
    linalg.yield %h : f16
  } -> tensor<1x2x6x8xf16>
  %ve = tensor.empty() : tensor<1x2x6x8xf16>
  %v = linalg.generic {indexing_maps = [affine_map<(w, x, y, z) -> (w, x, y, z)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%ve : tensor<1x2x6x8xf16>) {
  ^bb0(%out: f16):
    %x = linalg.index 1 : index
    %y = linalg.index 2 : index
    %z = linalg.index 3 : index
    %x7 = arith.muli %x, %c7 : index
    %xy = arith.addi %x7, %y : index
    %xy8 = arith.muli %xy, %c8 : index
    %n = arith.addi %xy8, %z : index
    %ni = arith.index_cast %n : index to i64
    %nf = arith.sitofp %ni : i64 to f32
    %t = arith.mulf %nf, %fc : f32
    %t2 = arith.addf %t, %fd : f32
    %sn = math.sin %t2 : f32
    %h = arith.truncf %sn : f32 to f16
    linalg.yield %h : f16
  } -> tensor<1x2x6x8xf16>
  %doe = tensor.empty() : tensor<1x4x6x8xf16>
  %do = linalg.generic {indexing_maps = [affine_map<(w, x, y, z) -> (w, x, y, z)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%doe : tensor<1x4x6x8xf16>) {
  ^bb0(%out: f16):
    %x = linalg.index 1 : index
    %y = linalg.index 2 : index
    %z = linalg.index 3 : index
    %x7 = arith.muli %x, %c7 : index
    %xy = arith.addi %x7, %y : index
    %xy8 = arith.muli %xy, %c8 : index
    %n = arith.addi %xy8, %z : index
    %ni = arith.index_cast %n : index to i64
    %nf = arith.sitofp %ni : i64 to f32
    %t = arith.mulf %nf, %fe : f32
    %t2 = arith.addf %t, %fd : f32
    %sn = math.sin %t2 : f32
    %h = arith.truncf %sn : f32 to f16
    linalg.yield %h : f16
  } -> tensor<1x4x6x8xf16>
  %s = arith.constant dense<[[[[0, 1, -1], [0, 1, 2], [1, 2, -1], [0, 2, 2], [2, 1, 0], [0, 1, 2]],
                              [[0, 1, 2], [1, -1, -1], [0, 1, 2], [2, 0, 1], [0, 1, 2], [-1, 2, 0]]]]>
      : tensor<1x2x6x3xi32>
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 2
      : tensor<1x4x6x8xf16>, tensor<1x2x6x8xf16>, tensor<1x2x6x8xf16>, tensor<1x2x6x3xi32>
      -> tensor<1x4x6x8xf16>, tensor<1x4x6xf32>
  %dq32, %dk32, %dv32 = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 2
      : tensor<1x4x6x8xf16>, tensor<1x2x6x8xf16>, tensor<1x2x6x8xf16>, tensor<1x2x6x3xi32>,
        tensor<1x4x6x8xf16>, tensor<1x4x6xf32>, tensor<1x4x6x8xf16>
      -> tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>
  %dq16, %dk16, %dv16 = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = 2
      : tensor<1x4x6x8xf16>, tensor<1x2x6x8xf16>, tensor<1x2x6x8xf16>, tensor<1x2x6x3xi32>,
        tensor<1x4x6x8xf16>, tensor<1x4x6xf32>, tensor<1x4x6x8xf16>
      -> tensor<1x4x6x8xf16>, tensor<1x2x6x8xf16>, tensor<1x2x6x8xf16>
  %a0 = tensor.cast %dq32 : tensor<1x4x6x8xf32> to tensor<1x?x?x8xf32>
  %b0 = tensor.cast %dq16 : tensor<1x4x6x8xf16> to tensor<1x?x?x8xf16>
  %a1 = tensor.cast %dk32 : tensor<1x2x6x8xf32> to tensor<1x?x?x8xf32>
  %b1 = tensor.cast %dk16 : tensor<1x2x6x8xf16> to tensor<1x?x?x8xf16>
  %a2 = tensor.cast %dv32 : tensor<1x2x6x8xf32> to tensor<1x?x?x8xf32>
  %b2 = tensor.cast %dv16 : tensor<1x2x6x8xf16> to tensor<1x?x?x8xf16>
  %n0 = call @differ(%a0, %b0) : (tensor<1x?x?x8xf32>, tensor<1x?x?x8xf16>) -> i64
  %n1 = call @differ(%a1, %b1) : (tensor<1x?x?x8xf32>, tensor<1x?x?x8xf16>) -> i64
  %n2 = call @differ(%a2, %b2) : (tensor<1x?x?x8xf32>, tensor<1x?x?x8xf16>) -> i64
  call @print(%n0) : (i64) -> ()
  call @print(%n1) : (i64) -> ()
  call @print(%n2) : (i64) -> ()
  // Some dk element is nonzero: 1.
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %x = tensor.extract %dk32[%c0, %c1, %c3, %c1] : tensor<1x2x6x8xf32>
  %zf = arith.constant 0.0 : f32
  %nz = arith.cmpf one, %x, %zf : f32
  %nzi = arith.extui %nz : i1 to i64
  call @print(%nzi) : (i64) -> ()
  return
}
