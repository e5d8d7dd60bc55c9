// RUN: pisa-opt %s --pisa-decompose-to-kernels --canonicalize --cse | FileCheck %s --check-prefix=KERNELS --enable-var-scope
// RUN: pisa-opt %s --pisa-decompose-to-kernels %bufferize --pisa-configure-kernels --convert-pisa-to-gpu --canonicalize --cse | FileCheck %s --enable-var-scope

// The packed backward on the GPU (docs/gpu.md, "Varlen"): the batched
// backward's kernel ops on the packed batch seen as a token-major batch of
// one, given cu_seqlens. The query index has a row per block slot of the
// batch (floor(Tk / C) + B rows), the query lists a row per query row.

// KERNELS-LABEL: func.func @grad(
// KERNELS-SAME: %[[Q:[a-z0-9]+]]: tensor<?x16x128xbf16>, %[[K:[a-z0-9]+]]: tensor<?x1x128xbf16>, %[[V:[a-z0-9]+]]: tensor<?x1x128xbf16>, %{{.*}}: tensor<?x1x8xi32>, %[[CQ:[a-z0-9]+]]: tensor<?xi32>, %[[CK:[a-z0-9]+]]: tensor<?xi32>
// KERNELS: %[[CKN:.*]] = tensor.dim %[[CK]], %c0
// KERNELS: %[[B:.*]] = arith.subi %[[CKN]], %c1 : index
// KERNELS: %[[TK:.*]] = tensor.dim %[[K]], %c0
// KERNELS: cf.assert %{{.*}}, "pisa.sparse_attention_grad_varlen: cu_seqlens_q and cu_seqlens_k give different B"
// KERNELS: %[[TQ:.*]] = tensor.dim %[[Q]], %c0
// KERNELS: %[[TV:.*]] = tensor.dim %[[V]], %c0
// KERNELS: cf.assert %{{.*}}, "pisa.sparse_attention_grad_varlen: Tk is above 2147483647 (cu_seqlens are i32)"
// KERNELS: cf.assert %{{.*}}, "pisa.sparse_attention_grad_varlen: dO's Tq differs from the queries'"
// dk's rows are the keys', dv's the values': two destinations.
// KERNELS: tensor.empty(%[[TQ]]) : tensor<?x16x128xf32>
// KERNELS: tensor.empty(%[[TK]]) : tensor<?x1x128xf32>
// KERNELS: tensor.empty(%[[TV]]) : tensor<?x1x128xf32>
// KERNELS: %[[D0:.*]] = tensor.empty(%[[TQ]]) : tensor<1x16x?xf32>
// KERNELS: cf.assert %{{.*}}, "pisa.sparse_attention_grad_varlen: B is above the GPU limit of 2147483647 (the query index's rows)"
// Slots floor(Tk / 64) + B, min(256, ceil(Tq / 32)) + 4 columns (at
// least 5); the lists Tq x K.
// KERNELS: %[[PER:.*]] = arith.divui %[[TK]], %c64 : index
// KERNELS: %[[SLOTS:.*]] = arith.addi %[[PER]], %[[B]] : index
// KERNELS: tensor.empty(%[[SLOTS]], %{{.*}}) : tensor<1x1x?x?xi32>
// KERNELS: tensor.empty(%[[TQ]]) : tensor<1x1x?x8xi32>
// KERNELS: %[[QH:.*]]:2 = pisa.kernel.sparse_attention_grad_queries {{.*}} cu_seqlens(%[[CQ]], %[[CK]] : tensor<?xi32>, tensor<?xi32>) outs(%{{.*}}, %[[D0]]) block_size = 64 scale = 0.0883883461 {token_major}
// KERNELS: %[[KH:.*]]:5 = pisa.kernel.sparse_attention_grad_keys {{.*}}, %[[QH]]#1, %{{.*}} cu_seqlens(%[[CQ]], %[[CK]] : tensor<?xi32>, tensor<?xi32>) outs({{.*}}) block_size = 64 scale = 0.0883883461 {token_major}
// KERNELS-DAG: tensor.collapse_shape %[[QH]]#0 {{\[}}[0, 1], [2], [3]]
// KERNELS-DAG: tensor.collapse_shape %[[KH]]#0 {{\[}}[0, 1], [2], [3]]
// KERNELS-DAG: tensor.collapse_shape %[[KH]]#1 {{\[}}[0, 1], [2], [3]]

// CHECK-LABEL: func.func @grad(
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention_grad_queries {{.*}} args({{.*}}, %arg4 : memref<?xi32>, %arg5 : memref<?xi32>)
// CHECK: gpu.launch_func @pisa_kernels::@zero_query_index
// CHECK: gpu.launch_func @pisa_kernels::@count_attending_queries {{.*}} args({{.*}}, %arg4 : memref<?xi32>, %arg5 : memref<?xi32>)
// CHECK: gpu.launch_func @pisa_kernels::@list_attending_queries {{.*}} args({{.*}}, %arg4 : memref<?xi32>, %arg5 : memref<?xi32>)
// CHECK: gpu.launch_func @pisa_kernels::@sparse_attention_grad_keys {{.*}} args({{.*}}, %arg4 : memref<?xi32>, %arg5 : memref<?xi32>)

// The query kernels find each query row's sequence (a binary search of
// cu_seqlens_q) and write NaN rows for a broken batch; the count and list
// kernels number their rows' blocks from the sequence's first slot; the key kernel
// finds its slot's sequence by a binary search of the first slots
// floor(cu_k[s] / 64) + s and writes NaN rows for a broken batch.
// CHECK: gpu.func @sparse_attention_grad_queries(
// CHECK: arith.constant 0x7FC00000 : f32
// CHECK: scf.while
// CHECK: gpu.func @count_attending_queries(
// CHECK: scf.while
// CHECK: memref.atomic_rmw addi
// CHECK: gpu.func @list_attending_queries(
// CHECK: scf.while
// CHECK: nvvm.match.sync
// CHECK: gpu.func @sparse_attention_grad_keys(
// CHECK: arith.constant 0x7FC00000 : f32
// CHECK: scf.while
// CHECK: arith.divui %{{.*}}, %c64

func.func @grad(%q: tensor<?x16x128xbf16>, %k: tensor<?x1x128xbf16>, %v: tensor<?x1x128xbf16>, %s: tensor<?x1x8xi32>, %cq: tensor<?xi32>, %ck: tensor<?xi32>, %o: tensor<?x16x128xbf16>, %l: tensor<?x16xf32>, %do: tensor<?x16x128xbf16>) -> (tensor<?x16x128xf32>, tensor<?x1x128xf32>, tensor<?x1x128xf32>) {
  %dq, %dk, %dv = pisa.sparse_attention_grad_varlen %q, %k, %v, %s cu_seqlens(%cq, %ck) out(%o, %l) grad(%do) block_size = 64 : tensor<?x16x128xbf16>, tensor<?x1x128xbf16>, tensor<?x1x128xbf16>, tensor<?x1x8xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x16x128xbf16>, tensor<?x16xf32>, tensor<?x16x128xbf16> -> tensor<?x16x128xf32>, tensor<?x1x128xf32>, tensor<?x1x128xf32>
  return %dq, %dk, %dv : tensor<?x16x128xf32>, tensor<?x1x128xf32>, tensor<?x1x128xf32>
}
