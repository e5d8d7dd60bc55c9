// Token-major sparse attention (docs/semantics.md, section 6) computes what
// the head-major op computes: the same q, k, v and selection given
// transposed ([B, T, H, X]) give the transposed output and lse ([B, Nq,
// Hq]), element for element. Prints the output elements that differ (0),
// the lse entries that differ (0), then the finite lse entries (20 of 24:
// query 2 of KV head 0 has no usable entry, and query 3's first entry, block
// 3, starts after it and hides the two below it, so both give -inf on their
// two heads).
// RUN: pisa-opt %s --pisa-cpu-pipeline | %mlir_runner -e main -entry-point-result=void -shared-libs=%runner_shared_libs | FileCheck %s --enable-var-scope
// CHECK: {{^}}0{{$}}
// CHECK-NEXT: {{^}}0{{$}}
// CHECK-NEXT: {{^}}20{{$}}

func.func private @printI64(i64)
func.func private @printNewline()

func.func @print(%v: i64) {
  call @printI64(%v) : (i64) -> ()
  call @printNewline() : () -> ()
  return
}

func.func @main() {
  %off = arith.constant 44 : index
  %fa = arith.constant 0.9 : f32
  %fb = arith.constant 0.37 : f32
  %fc = arith.constant 1.3 : f32
  %fd = arith.constant 0.3 : f32
  // Head-major q [1, 4, 6, 8], k [1, 2, 50, 8], v [1, 2, 50, 4]:
  // sin(a x1 + b x2 + c x3 + 0.3).
  %qe = tensor.empty() : tensor<1x4x6x8xf32>
  %q = linalg.generic {indexing_maps = [affine_map<(w, x, y, z) -> (w, x, y, z)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%qe : tensor<1x4x6x8xf32>) {
  ^bb0(%out: f32):
    %x = linalg.index 1 : index
    %y = linalg.index 2 : index
    %z = linalg.index 3 : index
    %xi = arith.index_cast %x : index to i64
    %yi = arith.index_cast %y : index to i64
    %zi = arith.index_cast %z : index to i64
    %xf = arith.sitofp %xi : i64 to f32
    %yf = arith.sitofp %yi : i64 to f32
    %zf = arith.sitofp %zi : i64 to f32
    %t0 = arith.mulf %xf, %fa : f32
    %t1 = arith.mulf %yf, %fb : f32
    %t2 = arith.mulf %zf, %fc : f32
    %t3 = arith.addf %t0, %t1 : f32
    %t4 = arith.addf %t3, %t2 : f32
    %t5 = arith.addf %t4, %fd : f32
    %val = math.sin %t5 : f32
    linalg.yield %val : f32
  } -> tensor<1x4x6x8xf32>
  %ke = tensor.empty() : tensor<1x2x50x8xf32>
  %k = linalg.generic {indexing_maps = [affine_map<(w, x, y, z) -> (w, x, y, z)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%ke : tensor<1x2x50x8xf32>) {
  ^bb0(%out: f32):
    %x = linalg.index 1 : index
    %y = linalg.index 2 : index
    %z = linalg.index 3 : index
    %xi = arith.index_cast %x : index to i64
    %yi = arith.index_cast %y : index to i64
    %zi = arith.index_cast %z : index to i64
    %xf = arith.sitofp %xi : i64 to f32
    %yf = arith.sitofp %yi : i64 to f32
    %zf = arith.sitofp %zi : i64 to f32
    %t0 = arith.mulf %xf, %fb : f32
    %t1 = arith.mulf %yf, %fc : f32
    %t2 = arith.mulf %zf, %fa : f32
    %t3 = arith.addf %t0, %t1 : f32
    %t4 = arith.addf %t3, %t2 : f32
    %t5 = arith.addf %t4, %fd : f32
    %val = math.sin %t5 : f32
    linalg.yield %val : f32
  } -> tensor<1x2x50x8xf32>
  %ve = tensor.empty() : tensor<1x2x50x4xf32>
  %v = linalg.generic {indexing_maps = [affine_map<(w, x, y, z) -> (w, x, y, z)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%ve : tensor<1x2x50x4xf32>) {
  ^bb0(%out: f32):
    %x = linalg.index 1 : index
    %y = linalg.index 2 : index
    %z = linalg.index 3 : index
    %xi = arith.index_cast %x : index to i64
    %yi = arith.index_cast %y : index to i64
    %zi = arith.index_cast %z : index to i64
    %xf = arith.sitofp %xi : i64 to f32
    %yf = arith.sitofp %yi : i64 to f32
    %zf = arith.sitofp %zi : i64 to f32
    %t0 = arith.mulf %xf, %fc : f32
    %t1 = arith.mulf %yf, %fa : f32
    %t2 = arith.mulf %zf, %fb : f32
    %t3 = arith.addf %t0, %t1 : f32
    %t4 = arith.addf %t3, %t2 : f32
    %t5 = arith.addf %t4, %fd : f32
    %val = math.sin %t5 : f32
    linalg.yield %val : f32
  } -> tensor<1x2x50x4xf32>
  // Rows of every kind: padding, duplicates, unsorted, out of range, empty.
  %s = arith.constant dense<[[[[0, 2, -1], [1, 2, 3], [-1, -1, -1], [3, 0, 2], [2, 2, 1], [0, 1, 5]],
                               [[0, 1, 2], [2, 3, -1], [1, -1, 3], [0, 0, 0], [3, 3, 3], [-1, 2, 0]]]]>
      : tensor<1x2x6x3xi32>
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 16
      : tensor<1x4x6x8xf32>, tensor<1x2x50x8xf32>, tensor<1x2x50x4xf32>, tensor<1x2x6x3xi32>
      -> tensor<1x4x6x4xf32>, tensor<1x4x6xf32>

  // The same data token-major.
  %qte = tensor.empty() : tensor<1x6x4x8xf32>
  %qt = linalg.transpose ins(%q : tensor<1x4x6x8xf32>) outs(%qte : tensor<1x6x4x8xf32>) permutation = [0, 2, 1, 3]
  %kte = tensor.empty() : tensor<1x50x2x8xf32>
  %kt = linalg.transpose ins(%k : tensor<1x2x50x8xf32>) outs(%kte : tensor<1x50x2x8xf32>) permutation = [0, 2, 1, 3]
  %vte = tensor.empty() : tensor<1x50x2x4xf32>
  %vt = linalg.transpose ins(%v : tensor<1x2x50x4xf32>) outs(%vte : tensor<1x50x2x4xf32>) permutation = [0, 2, 1, 3]
  %se = tensor.empty() : tensor<1x6x2x3xi32>
  %st = linalg.transpose ins(%s : tensor<1x2x6x3xi32>) outs(%se : tensor<1x6x2x3xi32>) permutation = [0, 2, 1, 3]
  %ot, %lt = pisa.sparse_attention %qt, %kt, %vt, %st, %off block_size = 16 {token_major}
      : tensor<1x6x4x8xf32>, tensor<1x50x2x8xf32>, tensor<1x50x2x4xf32>, tensor<1x6x2x3xi32>
      -> tensor<1x6x4x4xf32>, tensor<1x6x4xf32>

  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c6 = arith.constant 6 : index
  %zero = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  %inf = arith.constant 0x7F800000 : f32
  %counts:3 = scf.for %h = %c0 to %c4 step %c1 iter_args(%a0 = %zero, %b0 = %zero, %f0 = %zero) -> (i64, i64, i64) {
    %r:3 = scf.for %i = %c0 to %c6 step %c1 iter_args(%a1 = %a0, %b1 = %b0, %f1 = %f0) -> (i64, i64, i64) {
      %x = tensor.extract %l[%c0, %h, %i] : tensor<1x4x6xf32>
      %y = tensor.extract %lt[%c0, %i, %h] : tensor<1x6x4xf32>
      %same = arith.cmpf oeq, %x, %y : f32
      %lne = arith.select %same, %zero, %one : i64
      %b2 = arith.addi %b1, %lne : i64
      %ax = math.absf %x : f32
      %fin = arith.cmpf olt, %ax, %inf : f32
      %finc = arith.select %fin, %one, %zero : i64
      %f2 = arith.addi %f1, %finc : i64
      %a3 = scf.for %e = %c0 to %c4 step %c1 iter_args(%a2 = %a1) -> i64 {
        %u = tensor.extract %o[%c0, %h, %i, %e] : tensor<1x4x6x4xf32>
        %w = tensor.extract %ot[%c0, %i, %h, %e] : tensor<1x6x4x4xf32>
        %eq = arith.cmpf oeq, %u, %w : f32
        %ne = arith.select %eq, %zero, %one : i64
        %n = arith.addi %a2, %ne : i64
        scf.yield %n : i64
      }
      scf.yield %a3, %b2, %f2 : i64, i64, i64
    }
    scf.yield %r#0, %r#1, %r#2 : i64, i64, i64
  }
  call @print(%counts#0) : (i64) -> ()
  call @print(%counts#1) : (i64) -> ()
  call @print(%counts#2) : (i64) -> ()
  return
}
