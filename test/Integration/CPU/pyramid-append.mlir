// The cache contract of pisa.pyramid_append (docs/semantics.md, section 4):
// after appends of 10, 1 and 26 keys (and of 1, 29 and 7 in the second
// sequence) the cache, in the layout of its 100-key capacity, holds the
// pyramid of the 37 keys bitwise equal to pisa.pyramid_build over them, as
// after one append of all 37; skipping the middle append leaves stale
// nodes, which the comparison sees (the control: it can fail).
// RUN: pisa-opt %s --pisa-cpu-pipeline | %mlir_runner -e main -entry-point-result=void -shared-libs=%runner_shared_libs | FileCheck %s --enable-var-scope
// CHECK: {{^}}0{{$}}
// CHECK-NEXT: {{^}}240{{$}}
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

// Bitwise mismatches between the cache's rows of a 37-key pyramid (the
// capacity layout of 100 keys: levels at rows 0, 25, 38, 45, 49) and
// pyramid_build over the first 37 keys (rows 0, 10, 15, 18, 20; sizes 10,
// 5, 3, 2, 1).
func.func @mismatches(%cache: tensor<2x2x52x8xf32>, %full: tensor<2x2x21x8xf32>) -> i64 {
  %offCap = arith.constant dense<[0, 25, 38, 45, 49]> : tensor<5xindex>
  %offN = arith.constant dense<[0, 10, 15, 18, 20]> : tensor<5xindex>
  %sizes = arith.constant dense<[10, 5, 3, 2, 1]> : tensor<5xindex>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c5 = arith.constant 5 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  %n = scf.for %l = %c0 to %c5 step %c1 iter_args(%a0 = %zero) -> i64 {
    %oc = tensor.extract %offCap[%l] : tensor<5xindex>
    %on = tensor.extract %offN[%l] : tensor<5xindex>
    %m = tensor.extract %sizes[%l] : tensor<5xindex>
    %r1 = scf.for %b = %c0 to %c2 step %c1 iter_args(%a1 = %a0) -> i64 {
      %r2 = scf.for %h = %c0 to %c2 step %c1 iter_args(%a2 = %a1) -> i64 {
        %r3 = scf.for %i = %c0 to %m step %c1 iter_args(%a3 = %a2) -> i64 {
          %r4 = scf.for %e = %c0 to %c8 step %c1 iter_args(%a4 = %a3) -> i64 {
            %rc = arith.addi %oc, %i : index
            %rn = arith.addi %on, %i : index
            %x = tensor.extract %cache[%b, %h, %rc, %e] : tensor<2x2x52x8xf32>
            %y = tensor.extract %full[%b, %h, %rn, %e] : tensor<2x2x21x8xf32>
            %xi = arith.bitcast %x : f32 to i32
            %yi = arith.bitcast %y : f32 to i32
            %ne = arith.cmpi ne, %xi, %yi : i32
            %inc = arith.select %ne, %one, %zero : i64
            %s = arith.addi %a4, %inc : i64
            scf.yield %s : i64
          }
          scf.yield %r4 : i64
        }
        scf.yield %r3 : i64
      }
      scf.yield %r2 : i64
    }
    scf.yield %r1 : i64
  }
  return %n : i64
}

func.func @main() {
  %k = call @keys() : () -> tensor<2x2x100x8xf32>
  %k37 = tensor.extract_slice %k[0, 0, 0, 0] [2, 2, 37, 8] [1, 1, 1, 1] : tensor<2x2x100x8xf32> to tensor<2x2x37x8xf32>
  %full = pisa.pyramid_build %k37 block_size = 4 branching = 2 : tensor<2x2x37x8xf32> -> tensor<2x2x21x8xf32>
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<2x2x52x8xf32>
  %cache0 = linalg.fill ins(%zero : f32) outs(%empty : tensor<2x2x52x8xf32>) -> tensor<2x2x52x8xf32>
  // Sequence 0: 10 keys, 1 more, then 26; sequence 1: 1, then 29, then 7.
  %f1 = arith.constant dense<[0, 0]> : tensor<2xi32>
  %t1 = arith.constant dense<[10, 1]> : tensor<2xi32>
  %t2 = arith.constant dense<[11, 30]> : tensor<2xi32>
  %t3 = arith.constant dense<[37, 37]> : tensor<2xi32>
  %c1 = pisa.pyramid_append %k, %cache0, %f1, %t1 block_size = 4 branching = 2 : tensor<2x2x100x8xf32>, tensor<2x2x52x8xf32>, tensor<2xi32>, tensor<2xi32> -> tensor<2x2x52x8xf32>
  %c2 = pisa.pyramid_append %k, %c1, %t1, %t2 block_size = 4 branching = 2 : tensor<2x2x100x8xf32>, tensor<2x2x52x8xf32>, tensor<2xi32>, tensor<2xi32> -> tensor<2x2x52x8xf32>
  %c3 = pisa.pyramid_append %k, %c2, %t2, %t3 block_size = 4 branching = 2 : tensor<2x2x100x8xf32>, tensor<2x2x52x8xf32>, tensor<2xi32>, tensor<2xi32> -> tensor<2x2x52x8xf32>
  %n = call @mismatches(%c3, %full) : (tensor<2x2x52x8xf32>, tensor<2x2x21x8xf32>) -> i64
  call @printI64(%n) : (i64) -> ()
  call @printNewline() : () -> ()
  // Control: skipping the middle append leaves stale nodes, which the
  // comparison must see.
  %s3 = pisa.pyramid_append %k, %c1, %t2, %t3 block_size = 4 branching = 2 : tensor<2x2x100x8xf32>, tensor<2x2x52x8xf32>, tensor<2xi32>, tensor<2xi32> -> tensor<2x2x52x8xf32>
  %bad = call @mismatches(%s3, %full) : (tensor<2x2x52x8xf32>, tensor<2x2x21x8xf32>) -> i64
  call @printI64(%bad) : (i64) -> ()
  call @printNewline() : () -> ()
  // One append of all 37 keys at once.
  %once = pisa.pyramid_append %k, %cache0, %f1, %t3 block_size = 4 branching = 2 : tensor<2x2x100x8xf32>, tensor<2x2x52x8xf32>, tensor<2xi32>, tensor<2xi32> -> tensor<2x2x52x8xf32>
  %n1 = call @mismatches(%once, %full) : (tensor<2x2x52x8xf32>, tensor<2x2x21x8xf32>) -> i64
  call @printI64(%n1) : (i64) -> ()
  call @printNewline() : () -> ()
  return
}
