// Batched decode over caches (pisa.decode_select, docs/semantics.md
// section 4): two sequences of their own lengths (11 and 37 keys, caches of
// capacity 100 filled by one pyramid_append with per-sequence bounds); each
// row equals pisa.hier_topk over that sequence's keys and rebuilt pyramid
// (prints 0 differing entries each), and a length outside [Nq, Ncap]
// (0, then 101) gives that sequence K entries of -2 per row (12 = 2 heads x
// 6) while the other sequence is unaffected.
// RUN: pisa-opt %s --pisa-cpu-pipeline | %mlir_runner -e main -entry-point-result=void -shared-libs=%runner_shared_libs | FileCheck %s --enable-var-scope
// CHECK: {{^}}0{{$}}
// CHECK-NEXT: {{^}}0{{$}}
// CHECK-NEXT: {{^}}12{{$}}
// CHECK-NEXT: {{^}}0{{$}}
// CHECK-NEXT: {{^}}12{{$}}
// CHECK-NEXT: {{^}}0{{$}}

func.func private @printI64(i64)
func.func private @printNewline()

// Keys: sin(0.37 j + 1.3 e + 0.7 h + 2.1 b), [2, 2, 100, 8].
func.func @keys() -> tensor<2x2x100x8xf32> {
  %e = tensor.empty() : tensor<2x2x100x8xf32>
  %k = linalg.generic {indexing_maps = [affine_map<(b, h, j, e) -> (b, h, j, e)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%e : tensor<2x2x100x8xf32>) {
  ^bb0(%out: f32):
    %b = linalg.index 0 : index
    %h = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = linalg.index 3 : index
    %bi = arith.index_cast %b : index to i64
    %hi = arith.index_cast %h : index to i64
    %ji = arith.index_cast %j : index to i64
    %ci = arith.index_cast %c : index to i64
    %bf = arith.sitofp %bi : i64 to f32
    %hf = arith.sitofp %hi : i64 to f32
    %jf = arith.sitofp %ji : i64 to f32
    %cf = arith.sitofp %ci : i64 to f32
    %a = arith.constant 0.37 : f32
    %p = arith.constant 1.3 : f32
    %q = arith.constant 0.7 : f32
    %r = arith.constant 2.1 : f32
    %t0 = arith.mulf %jf, %a : f32
    %t1 = arith.mulf %cf, %p : f32
    %t2 = arith.mulf %hf, %q : f32
    %t3 = arith.mulf %bf, %r : f32
    %s0 = arith.addf %t0, %t1 : f32
    %s1 = arith.addf %s0, %t2 : f32
    %s2 = arith.addf %s1, %t3 : f32
    %v = math.sin %s2 : f32
    linalg.yield %v : f32
  } -> tensor<2x2x100x8xf32>
  return %k : tensor<2x2x100x8xf32>
}


// Queries: cos(0.91 e + 0.5 h + 1.7 b), [2, 4, 1, 8] (G = 2).
func.func @queries() -> tensor<2x4x1x8xf32> {
  %e = tensor.empty() : tensor<2x4x1x8xf32>
  %q = linalg.generic {indexing_maps = [affine_map<(b, h, i, e) -> (b, h, i, e)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%e : tensor<2x4x1x8xf32>) {
  ^bb0(%out: f32):
    %b = linalg.index 0 : index
    %h = linalg.index 1 : index
    %c = linalg.index 3 : index
    %bi = arith.index_cast %b : index to i64
    %hi = arith.index_cast %h : index to i64
    %ci = arith.index_cast %c : index to i64
    %bf = arith.sitofp %bi : i64 to f32
    %hf = arith.sitofp %hi : i64 to f32
    %cf = arith.sitofp %ci : i64 to f32
    %a = arith.constant 0.91 : f32
    %p = arith.constant 0.5 : f32
    %r = arith.constant 1.7 : f32
    %t0 = arith.mulf %cf, %a : f32
    %t1 = arith.mulf %hf, %p : f32
    %t2 = arith.mulf %bf, %r : f32
    %s0 = arith.addf %t0, %t1 : f32
    %s1 = arith.addf %s0, %t2 : f32
    %v = math.cos %s1 : f32
    %x = arith.constant 3.0 : f32
    %w = arith.mulf %v, %x : f32
    linalg.yield %w : f32
  } -> tensor<2x4x1x8xf32>
  return %q : tensor<2x4x1x8xf32>
}

// Entries of row `b` of `got` [2, 2, 1, 6] that differ from `want` [1, 2, 1, 6].
func.func @differ(%got: tensor<2x2x1x6xi32>, %b: index, %want: tensor<1x2x1x6xi32>) -> i64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c6 = arith.constant 6 : index
  %zero = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  %n = scf.for %h = %c0 to %c2 step %c1 iter_args(%a0 = %zero) -> i64 {
    %n1 = scf.for %j = %c0 to %c6 step %c1 iter_args(%a1 = %a0) -> i64 {
      %x = tensor.extract %got[%b, %h, %c0, %j] : tensor<2x2x1x6xi32>
      %y = tensor.extract %want[%c0, %h, %c0, %j] : tensor<1x2x1x6xi32>
      %ne = arith.cmpi ne, %x, %y : i32
      %inc = arith.select %ne, %one, %zero : i64
      %s = arith.addi %a1, %inc : i64
      scf.yield %s : i64
    }
    scf.yield %n1 : i64
  }
  return %n : i64
}

// Entries of row `b` equal to -2.
func.func @invalid(%got: tensor<2x2x1x6xi32>, %b: index) -> i64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c6 = arith.constant 6 : index
  %zero = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  %m2 = arith.constant -2 : i32
  %n = scf.for %h = %c0 to %c2 step %c1 iter_args(%a0 = %zero) -> i64 {
    %n1 = scf.for %j = %c0 to %c6 step %c1 iter_args(%a1 = %a0) -> i64 {
      %x = tensor.extract %got[%b, %h, %c0, %j] : tensor<2x2x1x6xi32>
      %eq = arith.cmpi eq, %x, %m2 : i32
      %inc = arith.select %eq, %one, %zero : i64
      %s = arith.addi %a1, %inc : i64
      scf.yield %s : i64
    }
    scf.yield %n1 : i64
  }
  return %n : i64
}

func.func @print(%v: i64) {
  call @printI64(%v) : (i64) -> ()
  call @printNewline() : () -> ()
  return
}

// Sequence `b`'s selection for its last key (n keys) over pyramid_build.
func.func @want(%q: tensor<2x4x1x8xf32>, %k: tensor<2x2x100x8xf32>, %b: index, %n: index) -> tensor<1x2x1x6xi32> {
  %qb = tensor.extract_slice %q[%b, 0, 0, 0] [1, 4, 1, 8] [1, 1, 1, 1] : tensor<2x4x1x8xf32> to tensor<1x4x1x8xf32>
  %kb = tensor.extract_slice %k[%b, 0, 0, 0] [1, 2, %n, 8] [1, 1, 1, 1] : tensor<2x2x100x8xf32> to tensor<1x2x?x8xf32>
  %p = pisa.pyramid_build %kb block_size = 2 branching = 2 : tensor<1x2x?x8xf32> -> tensor<1x2x?x8xf32>
  %c1 = arith.constant 1 : index
  %t = arith.subi %n, %c1 : index
  %s = pisa.hier_topk %qb, %kb, %p, %t topk = 6 block_size = 2 branching = 2
      : tensor<1x4x1x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32> -> tensor<1x2x1x6xi32>
  return %s : tensor<1x2x1x6xi32>
}

func.func @main() {
  %k = call @keys() : () -> tensor<2x2x100x8xf32>
  %q = call @queries() : () -> tensor<2x4x1x8xf32>
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<2x2x102x8xf32>
  %cache0 = linalg.fill ins(%zero : f32) outs(%empty : tensor<2x2x102x8xf32>) -> tensor<2x2x102x8xf32>
  %from = arith.constant dense<[0, 0]> : tensor<2xi32>
  %to = arith.constant dense<[11, 37]> : tensor<2xi32>
  %cache = pisa.pyramid_append %k, %cache0, %from, %to block_size = 2 branching = 2 : tensor<2x2x100x8xf32>, tensor<2x2x102x8xf32>, tensor<2xi32>, tensor<2xi32> -> tensor<2x2x102x8xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c11 = arith.constant 11 : index
  %c37 = arith.constant 37 : index
  %want0 = call @want(%q, %k, %c0, %c11) : (tensor<2x4x1x8xf32>, tensor<2x2x100x8xf32>, index, index) -> tensor<1x2x1x6xi32>
  %want1 = call @want(%q, %k, %c1, %c37) : (tensor<2x4x1x8xf32>, tensor<2x2x100x8xf32>, index, index) -> tensor<1x2x1x6xi32>

  %got = pisa.decode_select %q, %k, %cache seq_lens(%to) topk = 6 block_size = 2 branching = 2
      : tensor<2x4x1x8xf32>, tensor<2x2x100x8xf32>, tensor<2x2x102x8xf32>, tensor<2xi32> -> tensor<2x2x1x6xi32>
  %d0 = call @differ(%got, %c0, %want0) : (tensor<2x2x1x6xi32>, index, tensor<1x2x1x6xi32>) -> i64
  call @print(%d0) : (i64) -> ()
  %d1 = call @differ(%got, %c1, %want1) : (tensor<2x2x1x6xi32>, index, tensor<1x2x1x6xi32>) -> i64
  call @print(%d1) : (i64) -> ()

  %none = arith.constant dense<[0, 37]> : tensor<2xi32>
  %got2 = pisa.decode_select %q, %k, %cache seq_lens(%none) topk = 6 block_size = 2 branching = 2
      : tensor<2x4x1x8xf32>, tensor<2x2x100x8xf32>, tensor<2x2x102x8xf32>, tensor<2xi32> -> tensor<2x2x1x6xi32>
  %i2 = call @invalid(%got2, %c0) : (tensor<2x2x1x6xi32>, index) -> i64
  call @print(%i2) : (i64) -> ()
  %e2 = call @differ(%got2, %c1, %want1) : (tensor<2x2x1x6xi32>, index, tensor<1x2x1x6xi32>) -> i64
  call @print(%e2) : (i64) -> ()

  %over = arith.constant dense<[101, 37]> : tensor<2xi32>
  %got3 = pisa.decode_select %q, %k, %cache seq_lens(%over) topk = 6 block_size = 2 branching = 2
      : tensor<2x4x1x8xf32>, tensor<2x2x100x8xf32>, tensor<2x2x102x8xf32>, tensor<2xi32> -> tensor<2x2x1x6xi32>
  %i3 = call @invalid(%got3, %c0) : (tensor<2x2x1x6xi32>, index) -> i64
  call @print(%i3) : (i64) -> ()
  %e3 = call @differ(%got3, %c1, %want1) : (tensor<2x2x1x6xi32>, index, tensor<1x2x1x6xi32>) -> i64
  call @print(%e3) : (i64) -> ()
  return
}
