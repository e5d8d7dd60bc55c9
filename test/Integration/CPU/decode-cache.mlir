// Decode over the cache (C = 2, K = 6: the level above the leaves is
// ranked, so the cached summaries decide): hier_topk reading the
// pisa.pyramid_append cache
// (capacity = 100) selects exactly what it selects over pyramid_build of
// the same keys, after 11 and after 37 keys (queries at t = 10 and 36).
// RUN: pisa-opt %s --pisa-cpu-pipeline | %mlir_runner -e main -entry-point-result=void -shared-libs=%runner_shared_libs | FileCheck %s --enable-var-scope
// CHECK: {{^}}0{{$}}
// CHECK-NEXT: {{^}}0{{$}}
// CHECK-NEXT: {{^}}1{{$}}

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

// Differing entries of two selections.
func.func @differ(%a: tensor<2x2x1x6xi32>, %b: tensor<2x2x1x6xi32>) -> i64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c6 = arith.constant 6 : index
  %zero = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  %n = scf.for %i = %c0 to %c2 step %c1 iter_args(%a0 = %zero) -> i64 {
    %n1 = scf.for %h = %c0 to %c2 step %c1 iter_args(%a1 = %a0) -> i64 {
      %n2 = scf.for %j = %c0 to %c6 step %c1 iter_args(%a2 = %a1) -> i64 {
        %x = tensor.extract %a[%i, %h, %c0, %j] : tensor<2x2x1x6xi32>
        %y = tensor.extract %b[%i, %h, %c0, %j] : tensor<2x2x1x6xi32>
        %ne = arith.cmpi ne, %x, %y : i32
        %inc = arith.select %ne, %one, %zero : i64
        %s = arith.addi %a2, %inc : i64
        scf.yield %s : i64
      }
      scf.yield %n2 : i64
    }
    scf.yield %n1 : i64
  }
  return %n : i64
}

func.func @main() {
  %k = call @keys() : () -> tensor<2x2x100x8xf32>
  %q = call @queries() : () -> tensor<2x4x1x8xf32>
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<2x2x102x8xf32>
  %cache0 = linalg.fill ins(%zero : f32) outs(%empty : tensor<2x2x102x8xf32>) -> tensor<2x2x102x8xf32>
  %f0 = arith.constant dense<[0, 0]> : tensor<2xi32>
  %t11 = arith.constant dense<[11, 11]> : tensor<2xi32>
  %t37 = arith.constant dense<[37, 37]> : tensor<2xi32>
  %c11 = pisa.pyramid_append %k, %cache0, %f0, %t11 block_size = 2 branching = 2 : tensor<2x2x100x8xf32>, tensor<2x2x102x8xf32>, tensor<2xi32>, tensor<2xi32> -> tensor<2x2x102x8xf32>

  // t = 10: 11 keys, pyramid rows 6 + 3 + 2 + 1 = 12.
  %off10 = arith.constant 10 : index
  %k11 = tensor.extract_slice %k[0, 0, 0, 0] [2, 2, 11, 8] [1, 1, 1, 1] : tensor<2x2x100x8xf32> to tensor<2x2x11x8xf32>
  %p11 = pisa.pyramid_build %k11 block_size = 2 branching = 2 : tensor<2x2x11x8xf32> -> tensor<2x2x12x8xf32>
  %want10 = pisa.hier_topk %q, %k11, %p11, %off10 topk = 6 block_size = 2 branching = 2
      : tensor<2x4x1x8xf32>, tensor<2x2x11x8xf32>, tensor<2x2x12x8xf32> -> tensor<2x2x1x6xi32>
  %got10 = pisa.hier_topk %q, %k11, %c11, %off10 topk = 6 block_size = 2 branching = 2 capacity = 100
      : tensor<2x4x1x8xf32>, tensor<2x2x11x8xf32>, tensor<2x2x102x8xf32> -> tensor<2x2x1x6xi32>
  %d10 = call @differ(%got10, %want10) : (tensor<2x2x1x6xi32>, tensor<2x2x1x6xi32>) -> i64
  call @printI64(%d10) : (i64) -> ()
  call @printNewline() : () -> ()

  // t = 36 after appending keys 11..36.
  %c37 = pisa.pyramid_append %k, %c11, %t11, %t37 block_size = 2 branching = 2 : tensor<2x2x100x8xf32>, tensor<2x2x102x8xf32>, tensor<2xi32>, tensor<2xi32> -> tensor<2x2x102x8xf32>
  %off36 = arith.constant 36 : index
  %k37 = tensor.extract_slice %k[0, 0, 0, 0] [2, 2, 37, 8] [1, 1, 1, 1] : tensor<2x2x100x8xf32> to tensor<2x2x37x8xf32>
  %p37 = pisa.pyramid_build %k37 block_size = 2 branching = 2 : tensor<2x2x37x8xf32> -> tensor<2x2x40x8xf32>
  %want36 = pisa.hier_topk %q, %k37, %p37, %off36 topk = 6 block_size = 2 branching = 2
      : tensor<2x4x1x8xf32>, tensor<2x2x37x8xf32>, tensor<2x2x40x8xf32> -> tensor<2x2x1x6xi32>
  %got36 = pisa.hier_topk %q, %k37, %c37, %off36 topk = 6 block_size = 2 branching = 2 capacity = 100
      : tensor<2x4x1x8xf32>, tensor<2x2x37x8xf32>, tensor<2x2x102x8xf32> -> tensor<2x2x1x6xi32>
  %d36 = call @differ(%got36, %want36) : (tensor<2x2x1x6xi32>, tensor<2x2x1x6xi32>) -> i64
  call @printI64(%d36) : (i64) -> ()
  call @printNewline() : () -> ()

  // Control: the 11-key cache read as if it held 37 keys differs.
  %stale = pisa.hier_topk %q, %k37, %c11, %off36 topk = 6 block_size = 2 branching = 2 capacity = 100
      : tensor<2x4x1x8xf32>, tensor<2x2x37x8xf32>, tensor<2x2x102x8xf32> -> tensor<2x2x1x6xi32>
  %ds = call @differ(%stale, %want36) : (tensor<2x2x1x6xi32>, tensor<2x2x1x6xi32>) -> i64
  %zero64 = arith.constant 0 : i64
  %some = arith.cmpi ugt, %ds, %zero64 : i64
  %flag = arith.extui %some : i1 to i64
  call @printI64(%flag) : (i64) -> ()
  call @printNewline() : () -> ()
  return
}
