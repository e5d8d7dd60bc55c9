// RUN: pisa-opt %s | pisa-opt | FileCheck %s --enable-var-scope
// RUN: pisa-opt %s --mlir-print-op-generic | pisa-opt | FileCheck %s --enable-var-scope

// The varlen ops round-trip, static and dynamic. 1000 keys of B = 3
// sequences at C = 64: R = 2 * 15 + 32 * 3 = 126 pyramid rows.

// CHECK-LABEL: func.func @static
// CHECK: %[[P:.*]] = pisa.pyramid_build_varlen %{{.*}} cu_seqlens(%{{.*}}) block_size = 64 branching = 2 : tensor<1000x2x64xf16>, tensor<4xi32> -> tensor<126x2x64xf32>
// CHECK: pisa.hier_topk_varlen %{{.*}}, %{{.*}}, %[[P]] cu_seqlens(%{{.*}}, %{{.*}}) topk = 8 block_size = 64 branching = 2 scale = 1.250000e-01 : tensor<1010x8x64xf16>, tensor<1000x2x64xf16>, tensor<126x2x64xf32>, tensor<4xi32>, tensor<4xi32> -> tensor<1010x2x8xi32>
func.func @static(%q: tensor<1010x8x64xf16>, %k: tensor<1000x2x64xf16>, %cuq: tensor<4xi32>, %cuk: tensor<4xi32>) -> tensor<1010x2x8xi32> {
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cuk) block_size = 64 branching = 2 : tensor<1000x2x64xf16>, tensor<4xi32> -> tensor<126x2x64xf32>
  %s = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = 8 block_size = 64 branching = 2 scale = 0.125
      : tensor<1010x8x64xf16>, tensor<1000x2x64xf16>, tensor<126x2x64xf32>, tensor<4xi32>, tensor<4xi32> -> tensor<1010x2x8xi32>
  return %s : tensor<1010x2x8xi32>
}

// CHECK-LABEL: func.func @dynamic
// CHECK: pisa.hier_topk_varlen {{.*}} : tensor<?x4x16xf32>, tensor<?x4x16xf32>, tensor<?x4x16xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x4x3xi32>
func.func @dynamic(%q: tensor<?x4x16xf32>, %k: tensor<?x4x16xf32>, %cuq: tensor<?xi32>, %cuk: tensor<?xi32>) -> tensor<?x4x3xi32> {
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cuk) block_size = 1 branching = 64 : tensor<?x4x16xf32>, tensor<?xi32> -> tensor<?x4x16xf32>
  %s = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = 3 block_size = 1 branching = 64
      : tensor<?x4x16xf32>, tensor<?x4x16xf32>, tensor<?x4x16xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x4x3xi32>
  return %s : tensor<?x4x3xi32>
}

// CHECK-LABEL: func.func @attend_varlen
// CHECK-SAME: (%[[Q:[^:]*]]: {{[^,]*}}, %[[K:[^:]*]]: {{[^,]*}}, %[[V:[^:]*]]: {{[^,]*}}, %[[S:[^:]*]]: {{[^,]*}}, %[[CQ:[^:]*]]: {{[^,]*}}, %[[CK:[^:]*]]: {{[^,]*}}, %[[DO:[^:]*]]: {{[^)]*}})
// CHECK: %[[O:.*]], %[[L:.*]] = pisa.sparse_attention_varlen %[[Q]], %[[K]], %[[V]], %[[S]] cu_seqlens(%[[CQ]], %[[CK]]) block_size = 16 scale = 2.500000e-01 : tensor<?x8x16xbf16>, tensor<?x2x16xbf16>, tensor<?x2x8xbf16>, tensor<?x2x4xi32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x8xbf16>, tensor<?x8xf32>
// CHECK: pisa.sparse_attention_grad_varlen %[[Q]], %[[K]], %[[V]], %[[S]] cu_seqlens(%[[CQ]], %[[CK]]) out(%[[O]], %[[L]]) grad(%[[DO]]) block_size = 16 : tensor<?x8x16xbf16>, tensor<?x2x16xbf16>, tensor<?x2x8xbf16>, tensor<?x2x4xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x8x8xbf16>, tensor<?x8xf32>, tensor<?x8x8xbf16> -> tensor<?x8x16xf32>, tensor<?x2x16xbf16>, tensor<?x2x8xf32>
func.func @attend_varlen(%q: tensor<?x8x16xbf16>, %k: tensor<?x2x16xbf16>, %v: tensor<?x2x8xbf16>,
                         %s: tensor<?x2x4xi32>, %cuq: tensor<?xi32>, %cuk: tensor<?xi32>,
                         %do: tensor<?x8x8xbf16>)
    -> (tensor<?x8x16xf32>, tensor<?x2x16xbf16>, tensor<?x2x8xf32>) {
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cuq, %cuk) block_size = 16 scale = 0.25
      : tensor<?x8x16xbf16>, tensor<?x2x16xbf16>, tensor<?x2x8xbf16>, tensor<?x2x4xi32>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x8x8xbf16>, tensor<?x8xf32>
  %dq, %dk, %dv = pisa.sparse_attention_grad_varlen %q, %k, %v, %s cu_seqlens(%cuq, %cuk)
      out(%o, %l) grad(%do) block_size = 16
      : tensor<?x8x16xbf16>, tensor<?x2x16xbf16>, tensor<?x2x8xbf16>, tensor<?x2x4xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<?x8x8xbf16>, tensor<?x8xf32>, tensor<?x8x8xbf16>
      -> tensor<?x8x16xf32>, tensor<?x2x16xbf16>, tensor<?x2x8xf32>
  return %dq, %dk, %dv : tensor<?x8x16xf32>, tensor<?x2x16xbf16>, tensor<?x2x8xf32>
}
