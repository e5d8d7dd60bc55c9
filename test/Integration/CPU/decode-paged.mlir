// Paged key caches (docs/semantics.md, section 4): the keys of
// decode-batched.mlir stored in a pool of 40 pages of S = 7 keys, sequence
// 0 on the odd pages from 39 down, sequence 1 on the even pages from 0 up
// (block table [2, 15], capacity 105). The paged append fills the pyramid
// caches, whose leaves equal pyramid_build's (prints 0, 0), and the paged
// decode_select equals each sequence's selection over its rebuilt pyramid
// (0, 0); a page outside the pool makes that sequence's rows -2 (12 = 2
// heads x 6) and leaves the other alone (0).
// RUN: pisa-opt %s --pisa-cpu-pipeline | %mlir_runner -e main -entry-point-result=void -shared-libs=%runner_shared_libs | FileCheck %s --enable-var-scope
// CHECK: {{^}}0{{$}}
// CHECK-NEXT: {{^}}0{{$}}
// CHECK-NEXT: {{^}}0{{$}}
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

// The pool: page p, slot s holds key j = (p odd ? (39 - p) / 2 : p / 2) * 7 + s
// of sequence (p odd ? 0 : 1), the same formula as @keys (zeros past 100).
func.func @pool() -> tensor<40x7x2x8xf32> {
  %e = tensor.empty() : tensor<40x7x2x8xf32>
  %k = linalg.generic {indexing_maps = [affine_map<(p, s, h, e) -> (p, s, h, e)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%e : tensor<40x7x2x8xf32>) {
  ^bb0(%out: f32):
    %p = linalg.index 0 : index
    %s = linalg.index 1 : index
    %h = linalg.index 2 : index
    %c = linalg.index 3 : index
    %c2 = arith.constant 2 : index
    %c7 = arith.constant 7 : index
    %c39 = arith.constant 39 : index
    %c100 = arith.constant 100 : index
    %odd = arith.remui %p, %c2 : index
    %isOdd = arith.cmpi ne, %odd, %c2 : index
    %c1 = arith.constant 1 : index
    %o = arith.cmpi eq, %odd, %c1 : index
    %up = arith.subi %c39, %p : index
    %idxOdd = arith.divui %up, %c2 : index
    %idxEven = arith.divui %p, %c2 : index
    %idx = arith.select %o, %idxOdd, %idxEven : index
    %b = arith.select %o, %c1, %c1 : index
    %c0 = arith.constant 0 : index
    %bb = arith.select %o, %c0, %c1 : index
    %base = arith.muli %idx, %c7 : index
    %j = arith.addi %base, %s : index
    %bi = arith.index_cast %bb : index to i64
    %hi = arith.index_cast %h : index to i64
    %ji = arith.index_cast %j : index to i64
    %ci = arith.index_cast %c : index to i64
    %bf = arith.sitofp %bi : i64 to f32
    %hf = arith.sitofp %hi : i64 to f32
    %jf = arith.sitofp %ji : i64 to f32
    %cf = arith.sitofp %ci : i64 to f32
    %a = arith.constant 0.37 : f32
    %pp = arith.constant 1.3 : f32
    %q = arith.constant 0.7 : f32
    %r = arith.constant 2.1 : f32
    %t0 = arith.mulf %jf, %a : f32
    %t1 = arith.mulf %cf, %pp : f32
    %t2 = arith.mulf %hf, %q : f32
    %t3 = arith.mulf %bf, %r : f32
    %s0 = arith.addf %t0, %t1 : f32
    %s1 = arith.addf %s0, %t2 : f32
    %s2 = arith.addf %s1, %t3 : f32
    %v = math.sin %s2 : f32
    %inRange = arith.cmpi ult, %j, %c100 : index
    %zero = arith.constant 0.0 : f32
    %w = arith.select %inRange, %v, %zero : f32
    linalg.yield %w : f32
  } -> tensor<40x7x2x8xf32>
  return %k : tensor<40x7x2x8xf32>
}

// Leaves 0 .. ceil(n / 2) - 1 of sequence b of the cache that differ from
// pyramid_build of its keys 0 .. n - 1 (bit for bit).
func.func @leaves(%cache: tensor<2x2x108x8xf32>, %k: tensor<2x2x100x8xf32>, %b: index, %n: index) -> i64 {
  %kb = tensor.extract_slice %k[%b, 0, 0, 0] [1, 2, %n, 8] [1, 1, 1, 1] : tensor<2x2x100x8xf32> to tensor<1x2x?x8xf32>
  %p = pisa.pyramid_build %kb block_size = 2 branching = 2 : tensor<1x2x?x8xf32> -> tensor<1x2x?x8xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %m = arith.ceildivui %n, %c2 : index
  %zero = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  %d = scf.for %h = %c0 to %c2 step %c1 iter_args(%a0 = %zero) -> i64 {
    %d1 = scf.for %i = %c0 to %m step %c1 iter_args(%a1 = %a0) -> i64 {
      %d2 = scf.for %e = %c0 to %c8 step %c1 iter_args(%a2 = %a1) -> i64 {
        %x = tensor.extract %cache[%b, %h, %i, %e] : tensor<2x2x108x8xf32>
        %y = tensor.extract %p[%c0, %h, %i, %e] : tensor<1x2x?x8xf32>
        %ne = arith.cmpf une, %x, %y : f32
        %inc = arith.select %ne, %one, %zero : i64
        %s = arith.addi %a2, %inc : i64
        scf.yield %s : i64
      }
      scf.yield %d2 : i64
    }
    scf.yield %d1 : i64
  }
  return %d : i64
}

func.func @main() {
  %k = call @keys() : () -> tensor<2x2x100x8xf32>
  %q = call @queries() : () -> tensor<2x4x1x8xf32>
  %pages = call @pool() : () -> tensor<40x7x2x8xf32>
  %table = arith.constant dense<[[39, 37, 35, 33, 31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11],
                                 [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28]]> : tensor<2x15xi32>
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<2x2x108x8xf32>
  %cache0 = linalg.fill ins(%zero : f32) outs(%empty : tensor<2x2x108x8xf32>) -> tensor<2x2x108x8xf32>
  %from = arith.constant dense<[0, 0]> : tensor<2xi32>
  %to = arith.constant dense<[11, 37]> : tensor<2xi32>
  %cache = pisa.pyramid_append %pages, %cache0, %from, %to block_table(%table : tensor<2x15xi32>) block_size = 2 branching = 2
      : tensor<40x7x2x8xf32>, tensor<2x2x108x8xf32>, tensor<2xi32>, tensor<2xi32> -> tensor<2x2x108x8xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c11 = arith.constant 11 : index
  %c37 = arith.constant 37 : index
  %l0 = call @leaves(%cache, %k, %c0, %c11) : (tensor<2x2x108x8xf32>, tensor<2x2x100x8xf32>, index, index) -> i64
  call @print(%l0) : (i64) -> ()
  %l1 = call @leaves(%cache, %k, %c1, %c37) : (tensor<2x2x108x8xf32>, tensor<2x2x100x8xf32>, index, index) -> i64
  call @print(%l1) : (i64) -> ()

  %want0 = call @want(%q, %k, %c0, %c11) : (tensor<2x4x1x8xf32>, tensor<2x2x100x8xf32>, index, index) -> tensor<1x2x1x6xi32>
  %want1 = call @want(%q, %k, %c1, %c37) : (tensor<2x4x1x8xf32>, tensor<2x2x100x8xf32>, index, index) -> tensor<1x2x1x6xi32>
  %got = pisa.decode_select %q, %pages, %cache seq_lens(%to) block_table(%table : tensor<2x15xi32>) topk = 6 block_size = 2 branching = 2
      : tensor<2x4x1x8xf32>, tensor<40x7x2x8xf32>, tensor<2x2x108x8xf32>, tensor<2xi32> -> tensor<2x2x1x6xi32>
  %d0 = call @differ(%got, %c0, %want0) : (tensor<2x2x1x6xi32>, index, tensor<1x2x1x6xi32>) -> i64
  call @print(%d0) : (i64) -> ()
  %d1 = call @differ(%got, %c1, %want1) : (tensor<2x2x1x6xi32>, index, tensor<1x2x1x6xi32>) -> i64
  call @print(%d1) : (i64) -> ()

  // Sequence 0's first page outside the pool of 40.
  %bad = arith.constant dense<[[40, 37, 35, 33, 31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11],
                               [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28]]> : tensor<2x15xi32>
  %got2 = pisa.decode_select %q, %pages, %cache seq_lens(%to) block_table(%bad : tensor<2x15xi32>) topk = 6 block_size = 2 branching = 2
      : tensor<2x4x1x8xf32>, tensor<40x7x2x8xf32>, tensor<2x2x108x8xf32>, tensor<2xi32> -> tensor<2x2x1x6xi32>
  %i2 = call @invalid(%got2, %c0) : (tensor<2x2x1x6xi32>, index) -> i64
  call @print(%i2) : (i64) -> ()
  %e2 = call @differ(%got2, %c1, %want1) : (tensor<2x2x1x6xi32>, index, tensor<1x2x1x6xi32>) -> i64
  call @print(%e2) : (i64) -> ()
  return
}
