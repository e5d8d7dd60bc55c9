// RUN: pisa-opt %s | pisa-opt | FileCheck %s --enable-var-scope
// RUN: pisa-opt %s --mlir-print-op-generic | pisa-opt | FileCheck %s --enable-var-scope

// Every kernel-level op round-trips in both forms: on tensors (results tied
// to the destinations) and on buffers (no results).

// CHECK-LABEL: func.func @tensor_form
// CHECK: %[[P:.*]] = pisa.kernel.pyramid %{{.*}} outs(%{{.*}}) block_size = 64 branching = 2 : tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32> -> tensor<1x1x127x128xf32>
// CHECK: %[[PL:.*]] = pisa.kernel.fragment_planes %[[P]] outs(%{{.*}}) : tensor<1x1x127x128xf32>, tensor<1x1x127x256xbf16> -> tensor<1x1x127x256xbf16>
// CHECK: %[[W:.*]]:2 = pisa.kernel.walk %{{.*}}, %[[PL]], %{{.*}}, %{{.*}} outs(%{{.*}}, %{{.*}}) topk = 8 block_size = 64 branching = 2 scale = 0.0883883461 {tensor_cores}
// CHECK: %[[S:.*]]:8 = pisa.kernel.bucket %{{.*}}, %[[W]]#0, %[[W]]#1 outs({{.*}}) topk = 8 block_size = 64 q_tile = 4
// CHECK: %[[U:.*]] = pisa.kernel.score_tiles {{.*}}, %[[S]]#6 outs(%{{.*}}) topk = 8 block_size = 64 q_tile = 4 scale = 0.0883883461
// CHECK: pisa.kernel.select_final %{{.*}}, %{{.*}}, %[[W]]#0, %[[W]]#1, %[[U]] outs(%{{.*}}) topk = 8 block_size = 64
// CHECK: pisa.kernel.select_single_stage {{.*}} topk = 8 block_size = 64 branching = 2 scale = 1.250000e-01
func.func @tensor_form(%q: tensor<1x16x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>, %off: index) -> (tensor<1x1x4096x8xi32>, tensor<1x1x4096x8xi32>) {
  %n = arith.constant 4096 : index
  %p0 = tensor.empty() : tensor<1x1x127x128xf32>
  %p = pisa.kernel.pyramid %k outs(%p0) block_size = 64 branching = 2 : tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32> -> tensor<1x1x127x128xf32>
  %pl0 = tensor.empty() : tensor<1x1x127x256xbf16>
  %pl = pisa.kernel.fragment_planes %p outs(%pl0) : tensor<1x1x127x128xf32>, tensor<1x1x127x256xbf16> -> tensor<1x1x127x256xbf16>
  %c0 = tensor.empty() : tensor<1x1x4096x16xi32>
  %n0 = tensor.empty() : tensor<1x1x4096xi32>
  %w:2 = pisa.kernel.walk %q, %pl, %off, %n outs(%c0, %n0) topk = 8 block_size = 64 branching = 2 scale = 0.0883883461 {tensor_cores}
      : tensor<1x16x4096x128xbf16>, tensor<1x1x127x256xbf16>, tensor<1x1x4096x16xi32>, tensor<1x1x4096xi32> -> tensor<1x1x4096x16xi32>, tensor<1x1x4096xi32>
  %l = tensor.empty() : tensor<1x1x64xi32>
  %t = tensor.empty() : tensor<1x1x16448xi32>
  %nt = tensor.empty() : tensor<1x1xi32>
  %sp = tensor.empty() : tensor<1x1x65536xi32>
  %s:8 = pisa.kernel.bucket %off, %w#0, %w#1 outs(%l, %l, %l, %t, %t, %nt, %sp, %l) topk = 8 block_size = 64 q_tile = 4
      : tensor<1x1x4096x16xi32>, tensor<1x1x4096xi32>, tensor<1x1x64xi32>, tensor<1x1x64xi32>, tensor<1x1x64xi32>, tensor<1x1x16448xi32>, tensor<1x1x16448xi32>, tensor<1x1xi32>, tensor<1x1x65536xi32>, tensor<1x1x64xi32>
      -> tensor<1x1x64xi32>, tensor<1x1x64xi32>, tensor<1x1x64xi32>, tensor<1x1x16448xi32>, tensor<1x1x16448xi32>, tensor<1x1xi32>, tensor<1x1x65536xi32>, tensor<1x1x64xi32>
  %u0 = tensor.empty() : tensor<1x1x4096x16xf32>
  %u = pisa.kernel.score_tiles %q, %k, %off, %s#0, %s#1, %s#3, %s#4, %s#5, %s#6 outs(%u0) topk = 8 block_size = 64 q_tile = 4 scale = 0.0883883461
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x64xi32>, tensor<1x1x64xi32>, tensor<1x1x16448xi32>, tensor<1x1x16448xi32>, tensor<1x1xi32>, tensor<1x1x65536xi32>, tensor<1x1x4096x16xf32> -> tensor<1x1x4096x16xf32>
  %sel0 = tensor.empty() : tensor<1x1x4096x8xi32>
  %sel = pisa.kernel.select_final %off, %n, %w#0, %w#1, %u outs(%sel0) topk = 8 block_size = 64
      : tensor<1x1x4096x16xi32>, tensor<1x1x4096xi32>, tensor<1x1x4096x16xf32>, tensor<1x1x4096x8xi32> -> tensor<1x1x4096x8xi32>
  %one = pisa.kernel.select_single_stage %q, %k, %p, %off outs(%sel0) topk = 8 block_size = 64 branching = 2 scale = 0.125
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>, tensor<1x1x4096x8xi32> -> tensor<1x1x4096x8xi32>
  return %sel, %one : tensor<1x1x4096x8xi32>, tensor<1x1x4096x8xi32>
}

// CHECK-LABEL: func.func @buffer_form
// CHECK: pisa.kernel.pyramid %{{.*}} outs(%{{.*}}) block_size = 16 branching = 4 : memref<?x2x?x32xf16>, memref<?x2x?x32xf32>{{$}}
// CHECK: pisa.kernel.select_single_stage {{.*}} : memref<?x4x1x32xf16>, memref<?x2x?x32xf16>, memref<?x2x?x32xf32>, memref<?x2x1x4xi32>{{$}}
func.func @buffer_form(%q: memref<?x4x1x32xf16>, %k: memref<?x2x?x32xf16>, %p: memref<?x2x?x32xf32>, %sel: memref<?x2x1x4xi32>, %off: index) {
  pisa.kernel.pyramid %k outs(%p) block_size = 16 branching = 4 : memref<?x2x?x32xf16>, memref<?x2x?x32xf32>
  pisa.kernel.select_single_stage %q, %k, %p, %off outs(%sel) topk = 4 block_size = 16 branching = 4 scale = 0.25
      : memref<?x4x1x32xf16>, memref<?x2x?x32xf16>, memref<?x2x?x32xf32>, memref<?x2x1x4xi32>
  return
}

// The varlen kernel ops: packed [T, H, X] operands and cu_seqlens.
// CHECK-LABEL: func.func @varlen_forms
// CHECK: %[[VP:.*]] = pisa.kernel.pyramid_varlen %{{.*}}, %{{.*}} outs(%{{.*}}) block_size = 64 branching = 2 : tensor<?x2x64xf16>, tensor<?xi32>, tensor<?x2x64xf32> -> tensor<?x2x64xf32>
// CHECK: pisa.kernel.select_single_stage_varlen %{{.*}}, %{{.*}}, %[[VP]], %{{.*}}, %{{.*}} outs(%{{.*}}) topk = 8 block_size = 64 branching = 2 scale = 1.250000e-01 : tensor<?x8x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf32>, tensor<?xi32>, tensor<?xi32>, tensor<?x2x8xi32> -> tensor<?x2x8xi32>
// CHECK: pisa.kernel.pyramid_varlen %{{.*}}, %{{.*}} outs(%{{.*}}) block_size = 64 branching = 2 : memref<?x2x64xf16>, memref<?xi32>, memref<?x2x64xf32>
// CHECK-NOT: ->
// CHECK: pisa.kernel.select_single_stage_varlen {{.*}} : memref<?x8x64xf16>, memref<?x2x64xf16>, memref<?x2x64xf32>, memref<?xi32>, memref<?xi32>, memref<?x2x8xi32>
func.func @varlen_forms(%q: tensor<?x8x64xf16>, %k: tensor<?x2x64xf16>, %cuq: tensor<?xi32>, %cuk: tensor<?xi32>,
                        %p0: tensor<?x2x64xf32>, %s0: tensor<?x2x8xi32>,
                        %mq: memref<?x8x64xf16>, %mk: memref<?x2x64xf16>, %mcuq: memref<?xi32>, %mcuk: memref<?xi32>,
                        %mp: memref<?x2x64xf32>, %ms: memref<?x2x8xi32>) -> tensor<?x2x8xi32> {
  %p = pisa.kernel.pyramid_varlen %k, %cuk outs(%p0) block_size = 64 branching = 2 : tensor<?x2x64xf16>, tensor<?xi32>, tensor<?x2x64xf32> -> tensor<?x2x64xf32>
  %s = pisa.kernel.select_single_stage_varlen %q, %k, %p, %cuq, %cuk outs(%s0) topk = 8 block_size = 64 branching = 2 scale = 0.125
      : tensor<?x8x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf32>, tensor<?xi32>, tensor<?xi32>, tensor<?x2x8xi32> -> tensor<?x2x8xi32>
  pisa.kernel.pyramid_varlen %mk, %mcuk outs(%mp) block_size = 64 branching = 2 : memref<?x2x64xf16>, memref<?xi32>, memref<?x2x64xf32>
  pisa.kernel.select_single_stage_varlen %mq, %mk, %mp, %mcuq, %mcuk outs(%ms) topk = 8 block_size = 64 branching = 2 scale = 0.125
      : memref<?x8x64xf16>, memref<?x2x64xf16>, memref<?x2x64xf32>, memref<?xi32>, memref<?xi32>, memref<?x2x8xi32>
  return %s : tensor<?x2x8xi32>
}

// The two-stage ops on a packed batch (B = 1, cu_seqlens given).
// CHECK-LABEL: func.func @packed_two_stage
// CHECK: pisa.kernel.walk %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} cu_seqlens(%{{.*}}, %{{.*}} : memref<?xi32>, memref<?xi32>) outs(%{{.*}}, %{{.*}}) topk = 8 block_size = 64 branching = 2 scale = 1.250000e-01 {token_major}
// CHECK: pisa.kernel.select_final %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} cu_seqlens(%{{.*}}, %{{.*}} : memref<?xi32>, memref<?xi32>) outs(%{{.*}}) topk = 8 block_size = 64 {token_major}
func.func @packed_two_stage(%q: memref<1x?x8x64xf16>, %p: memref<1x?x2x64xf32>, %cuq: memref<?xi32>, %cuk: memref<?xi32>,
                            %c: memref<1x2x?x16xi32>, %n: memref<1x2x?xi32>, %u: memref<1x2x?x16xf32>,
                            %s: memref<1x?x2x8xi32>, %off: index, %nk: index) {
  pisa.kernel.walk %q, %p, %off, %nk cu_seqlens(%cuq, %cuk : memref<?xi32>, memref<?xi32>) outs(%c, %n) topk = 8 block_size = 64 branching = 2 scale = 0.125 {token_major}
      : memref<1x?x8x64xf16>, memref<1x?x2x64xf32>, memref<1x2x?x16xi32>, memref<1x2x?xi32>
  pisa.kernel.select_final %off, %nk, %c, %n, %u cu_seqlens(%cuq, %cuk : memref<?xi32>, memref<?xi32>) outs(%s) topk = 8 block_size = 64 {token_major}
      : memref<1x2x?x16xi32>, memref<1x2x?xi32>, memref<1x2x?x16xf32>, memref<1x?x2x8xi32>
  return
}

// The cache update reads and writes its destination; the single-stage
// selection over a cache says its capacity.
// CHECK-LABEL: func.func @decode_step
// CHECK: %[[P:.*]] = pisa.kernel.pyramid_append %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}) block_size = 64 branching = 2 : tensor<2x1x4096x64xf16>, tensor<2xi32>, tensor<2xi32>, tensor<2x1x127x64xf32> -> tensor<2x1x127x64xf32>
// CHECK: pisa.kernel.select_single_stage %{{.*}}, %{{.*}}, %[[P]], %{{.*}} outs(%{{.*}}) topk = 8 block_size = 64 branching = 2 scale = 1.250000e-01 capacity = 4096 :
// CHECK-LABEL: func.func @decode_step_buffers
// CHECK: pisa.kernel.pyramid_append %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}) block_size = 64 branching = 2 : memref<2x1x4096x64xf16>, memref<2xi32>, memref<2xi32>, memref<2x1x127x64xf32>
// CHECK-NOT: ->
func.func @decode_step(%q: tensor<2x8x1x64xf16>, %k: tensor<2x1x4096x64xf16>, %p: tensor<2x1x127x64xf32>, %from: tensor<2xi32>, %to: tensor<2xi32>, %off: index) -> tensor<2x1x1x8xi32> {
  %p1 = pisa.kernel.pyramid_append %k, %from, %to outs(%p) block_size = 64 branching = 2 : tensor<2x1x4096x64xf16>, tensor<2xi32>, tensor<2xi32>, tensor<2x1x127x64xf32> -> tensor<2x1x127x64xf32>
  %s0 = tensor.empty() : tensor<2x1x1x8xi32>
  %s = pisa.kernel.select_single_stage %q, %k, %p1, %off outs(%s0) topk = 8 block_size = 64 branching = 2 scale = 0.125 capacity = 4096
      : tensor<2x8x1x64xf16>, tensor<2x1x4096x64xf16>, tensor<2x1x127x64xf32>, tensor<2x1x1x8xi32> -> tensor<2x1x1x8xi32>
  return %s : tensor<2x1x1x8xi32>
}
func.func @decode_step_buffers(%k: memref<2x1x4096x64xf16>, %p: memref<2x1x127x64xf32>, %from: memref<2xi32>, %to: memref<2xi32>) {
  pisa.kernel.pyramid_append %k, %from, %to outs(%p) block_size = 64 branching = 2 : memref<2x1x4096x64xf16>, memref<2xi32>, memref<2xi32>, memref<2x1x127x64xf32>
  return
}

// CHECK-LABEL: func.func @select_decode
// CHECK: pisa.kernel.select_decode %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}) topk = 8 block_size = 64 branching = 2 scale = 1.250000e-01 : tensor<?x8x1x64xf16>, tensor<?x1x4096x64xf16>, tensor<?x1x127x64xf32>, tensor<?xi32>, tensor<?x1x1x8xi32> -> tensor<?x1x1x8xi32>
func.func @select_decode(%q: tensor<?x8x1x64xf16>, %k: tensor<?x1x4096x64xf16>, %p: tensor<?x1x127x64xf32>, %n: tensor<?xi32>, %s0: tensor<?x1x1x8xi32>) -> tensor<?x1x1x8xi32> {
  %s = pisa.kernel.select_decode %q, %k, %p, %n outs(%s0) topk = 8 block_size = 64 branching = 2 scale = 0.125
      : tensor<?x8x1x64xf16>, tensor<?x1x4096x64xf16>, tensor<?x1x127x64xf32>, tensor<?xi32>, tensor<?x1x1x8xi32> -> tensor<?x1x1x8xi32>
  return %s : tensor<?x1x1x8xi32>
}

// CHECK-LABEL: func.func @sparse_attention
// CHECK: %{{.*}}:2 = pisa.kernel.sparse_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}, %{{.*}}) block_size = 64 scale = 1.250000e-01 : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x2x?x8xi32>, tensor<?x8x?x32xbf16>, tensor<?x8x?xf32> -> tensor<?x8x?x32xbf16>, tensor<?x8x?xf32>
func.func @sparse_attention(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x2x?x64xbf16>, %v: tensor<?x2x?x32xbf16>, %s: tensor<?x2x?x8xi32>, %off: index, %o0: tensor<?x8x?x32xbf16>, %l0: tensor<?x8x?xf32>) -> (tensor<?x8x?x32xbf16>, tensor<?x8x?xf32>) {
  %o, %l = pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o0, %l0) block_size = 64 scale = 0.125
      : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x2x?x8xi32>, tensor<?x8x?x32xbf16>, tensor<?x8x?xf32> -> tensor<?x8x?x32xbf16>, tensor<?x8x?xf32>
  return %o, %l : tensor<?x8x?x32xbf16>, tensor<?x8x?xf32>
}

// CHECK-LABEL: func.func @sparse_attention_buffers
// CHECK: pisa.kernel.sparse_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}, %{{.*}}) block_size = 32 scale = 1.250000e-01 : memref<1x4x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x3xi32>, memref<1x4x10x64xf16>, memref<1x4x10xf32>
func.func @sparse_attention_buffers(%q: memref<1x4x10x64xf16>, %k: memref<1x1x10x64xf16>, %v: memref<1x1x10x64xf16>, %s: memref<1x1x10x3xi32>, %off: index, %o: memref<1x4x10x64xf16>, %l: memref<1x4x10xf32>) {
  pisa.kernel.sparse_attention %q, %k, %v, %s, %off outs(%o, %l) block_size = 32 scale = 0.125
      : memref<1x4x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x64xf16>, memref<1x1x10x3xi32>, memref<1x4x10x64xf16>, memref<1x4x10xf32>
  return
}

// CHECK-LABEL: func.func @paged_buffers
// CHECK: pisa.kernel.pyramid_append %{{.*}}, %{{.*}}, %{{.*}} block_table(%{{.*}} : memref<2x8xi32>) outs(%{{.*}}) block_size = 16 branching = 2 : memref<20x16x1x32xf16>, memref<2xi32>, memref<2xi32>, memref<2x1x15x32xf32>
// CHECK: pisa.kernel.select_decode %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} block_table(%{{.*}} : memref<2x8xi32>) outs(%{{.*}}) topk = 4 block_size = 16 branching = 2 scale = 1.250000e-01 : memref<2x4x1x32xf16>, memref<20x16x1x32xf16>, memref<2x1x15x32xf32>, memref<2xi32>, memref<2x1x1x4xi32>
func.func @paged_buffers(%q: memref<2x4x1x32xf16>, %pool: memref<20x16x1x32xf16>, %p: memref<2x1x15x32xf32>, %from: memref<2xi32>, %to: memref<2xi32>, %bt: memref<2x8xi32>, %s: memref<2x1x1x4xi32>) {
  pisa.kernel.pyramid_append %pool, %from, %to block_table(%bt : memref<2x8xi32>) outs(%p) block_size = 16 branching = 2
      : memref<20x16x1x32xf16>, memref<2xi32>, memref<2xi32>, memref<2x1x15x32xf32>
  pisa.kernel.select_decode %q, %pool, %p, %to block_table(%bt : memref<2x8xi32>) outs(%s) topk = 4 block_size = 16 branching = 2 scale = 0.125
      : memref<2x4x1x32xf16>, memref<20x16x1x32xf16>, memref<2x1x15x32xf32>, memref<2xi32>, memref<2x1x1x4xi32>
  return
}

// CHECK-LABEL: func.func @lse_score
// CHECK: pisa.kernel.lse_score %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}) level = 2 block_size = 16 branching = 3 scale = 2.500000e-01 : tensor<?x6x?x32xf16>, tensor<?x2x?x32xf32>, tensor<?x2x?x?xi32>, tensor<?x2x?x?xf32> -> tensor<?x2x?x?xf32>
func.func @lse_score(%q: tensor<?x6x?x32xf16>, %c: tensor<?x2x?x32xf32>, %n: tensor<?x2x?x?xi32>, %off: index, %u0: tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32> {
  %u = pisa.kernel.lse_score %q, %c, %n, %off outs(%u0) level = 2 block_size = 16 branching = 3 scale = 0.25
      : tensor<?x6x?x32xf16>, tensor<?x2x?x32xf32>, tensor<?x2x?x?xi32>, tensor<?x2x?x?xf32> -> tensor<?x2x?x?xf32>
  return %u : tensor<?x2x?x?xf32>
}

// CHECK-LABEL: func.func @lse_score_buffers
// CHECK: pisa.kernel.lse_score %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}) level = 1 block_size = 8 branching = 2 scale = 5.000000e-01 : memref<1x4x10x16xbf16>, memref<1x1x20x16xbf16>, memref<1x1x10x3xi32>, memref<1x1x10x3xf32>
func.func @lse_score_buffers(%q: memref<1x4x10x16xbf16>, %k: memref<1x1x20x16xbf16>, %n: memref<1x1x10x3xi32>, %off: index, %u: memref<1x1x10x3xf32>) {
  pisa.kernel.lse_score %q, %k, %n, %off outs(%u) level = 1 block_size = 8 branching = 2 scale = 0.5
      : memref<1x4x10x16xbf16>, memref<1x1x20x16xbf16>, memref<1x1x10x3xi32>, memref<1x1x10x3xf32>
  return
}

// CHECK-LABEL: func.func @append_select_single_stage
// CHECK: pisa.kernel.append_select_single_stage %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}) topk = 4 block_size = 16 branching = 2 scale = 1.250000e-01 capacity = 64 : memref<2x4x1x32xf16>, memref<2x1x?x32xf16>, memref<2x1x7x32xf32>, memref<2x1x64x32xf16>, memref<2xi32>, memref<2xi32>, memref<2x1x1x4xi32>
func.func @append_select_single_stage(%q: memref<2x4x1x32xf16>, %k: memref<2x1x?x32xf16>, %p: memref<2x1x7x32xf32>, %off: index, %kc: memref<2x1x64x32xf16>, %from: memref<2xi32>, %to: memref<2xi32>, %s: memref<2x1x1x4xi32>) {
  pisa.kernel.append_select_single_stage %q, %k, %p, %off, %kc, %from, %to outs(%s) topk = 4 block_size = 16 branching = 2 scale = 0.125 capacity = 64
      : memref<2x4x1x32xf16>, memref<2x1x?x32xf16>, memref<2x1x7x32xf32>, memref<2x1x64x32xf16>, memref<2xi32>, memref<2xi32>, memref<2x1x1x4xi32>
  return
}

// CHECK-LABEL: func.func @attention_grad
// CHECK: %[[Q:.*]]:2 = pisa.kernel.sparse_attention_grad_queries %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}, %{{.*}}) block_size = 64 scale = 1.250000e-01 : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x2x?x8xi32>, tensor<?x8x?x32xbf16>, tensor<?x8x?xf32>, tensor<?x8x?x32xbf16>, tensor<?x8x?x64xf32>, tensor<?x8x?xf32> -> tensor<?x8x?x64xf32>, tensor<?x8x?xf32>
// CHECK: %{{.*}}:5 = pisa.kernel.sparse_attention_grad_keys %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[Q]]#1, %{{.*}} outs(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) block_size = 64 scale = 1.250000e-01 : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x2x?x8xi32>, tensor<?x8x?xf32>, tensor<?x8x?xf32>, tensor<?x8x?x32xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x2x?x?xi32>, tensor<?x2x?x8xi32>, tensor<?x2x?x96xf32> -> tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x2x?x?xi32>, tensor<?x2x?x8xi32>, tensor<?x2x?x96xf32>
func.func @attention_grad(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x2x?x64xbf16>, %v: tensor<?x2x?x32xbf16>, %s: tensor<?x2x?x8xi32>, %off: index, %o: tensor<?x8x?x32xbf16>, %l: tensor<?x8x?xf32>, %do: tensor<?x8x?x32xbf16>, %dq0: tensor<?x8x?x64xf32>, %dd0: tensor<?x8x?xf32>, %dk0: tensor<?x2x?x64xbf16>, %dv0: tensor<?x2x?x32xbf16>, %i0: tensor<?x2x?x?xi32>, %l0: tensor<?x2x?x8xi32>, %a0: tensor<?x2x?x96xf32>) -> (tensor<?x8x?x64xf32>, tensor<?x2x?x64xbf16>) {
  %dq, %dd = pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %s, %off, %o, %l, %do outs(%dq0, %dd0) block_size = 64 scale = 0.125
      : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x2x?x8xi32>, tensor<?x8x?x32xbf16>, tensor<?x8x?xf32>, tensor<?x8x?x32xbf16>, tensor<?x8x?x64xf32>, tensor<?x8x?xf32> -> tensor<?x8x?x64xf32>, tensor<?x8x?xf32>
  %dk, %dv, %index, %list, %acc = pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk0, %dv0, %i0, %l0, %a0) block_size = 64 scale = 0.125
      : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x2x?x8xi32>, tensor<?x8x?xf32>, tensor<?x8x?xf32>, tensor<?x8x?x32xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x2x?x?xi32>, tensor<?x2x?x8xi32>, tensor<?x2x?x96xf32> -> tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x2x?x?xi32>, tensor<?x2x?x8xi32>, tensor<?x2x?x96xf32>
  return %dq, %dk : tensor<?x8x?x64xf32>, tensor<?x2x?x64xbf16>
}

// The backward with dq from the key half's dS tiles: D first, the key
// half storing its tiles (scores: [B, Hkv, Nq, K G C] = 8 x 4 x 64), dq
// from them.
// CHECK-LABEL: func.func @attention_grad_from_scores
// CHECK: %[[D:.*]] = pisa.kernel.sparse_attention_grad_delta %{{.*}}, %{{.*}} outs(%{{.*}}) : tensor<?x8x?x32xbf16>, tensor<?x8x?x32xbf16>, tensor<?x8x?xf32> -> tensor<?x8x?xf32>
// CHECK: %[[K:.*]]:6 = pisa.kernel.sparse_attention_grad_keys %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[D]], %{{.*}} outs(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scores %{{.*}}) block_size = 64 scale = 1.250000e-01 : {{.*}}, scores tensor<?x2x?x2048xbf16> -> {{.*}}, tensor<?x2x?x2048xbf16>
// CHECK: pisa.kernel.sparse_attention_grad_queries_from_scores %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[K]]#5 outs(%{{.*}}) block_size = 64 scale = 1.250000e-01 : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x8xi32>, tensor<?x2x?x2048xbf16>, tensor<?x8x?x64xf32> -> tensor<?x8x?x64xf32>
func.func @attention_grad_from_scores(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x2x?x64xbf16>, %v: tensor<?x2x?x32xbf16>, %s: tensor<?x2x?x8xi32>, %off: index, %o: tensor<?x8x?x32xbf16>, %l: tensor<?x8x?xf32>, %do: tensor<?x8x?x32xbf16>, %dq0: tensor<?x8x?x64xf32>, %dd0: tensor<?x8x?xf32>, %dk0: tensor<?x2x?x64xbf16>, %dv0: tensor<?x2x?x32xbf16>, %i0: tensor<?x2x?x?xi32>, %l0: tensor<?x2x?x8xi32>, %a0: tensor<?x2x?x96xf32>, %ds0: tensor<?x2x?x2048xbf16>) -> (tensor<?x8x?x64xf32>, tensor<?x2x?x64xbf16>) {
  %dd = pisa.kernel.sparse_attention_grad_delta %o, %do outs(%dd0)
      : tensor<?x8x?x32xbf16>, tensor<?x8x?x32xbf16>, tensor<?x8x?xf32> -> tensor<?x8x?xf32>
  %dk, %dv, %index, %list, %acc, %ds = pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk0, %dv0, %i0, %l0, %a0 scores %ds0) block_size = 64 scale = 0.125
      : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x2x?x8xi32>, tensor<?x8x?xf32>, tensor<?x8x?xf32>, tensor<?x8x?x32xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x2x?x?xi32>, tensor<?x2x?x8xi32>, tensor<?x2x?x96xf32>, scores tensor<?x2x?x2048xbf16> -> tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x2x?x?xi32>, tensor<?x2x?x8xi32>, tensor<?x2x?x96xf32>, tensor<?x2x?x2048xbf16>
  %dq = pisa.kernel.sparse_attention_grad_queries_from_scores %q, %k, %s, %off, %ds outs(%dq0) block_size = 64 scale = 0.125
      : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x8xi32>, tensor<?x2x?x2048xbf16>, tensor<?x8x?x64xf32> -> tensor<?x8x?x64xf32>
  return %dq, %dk : tensor<?x8x?x64xf32>, tensor<?x2x?x64xbf16>
}

// CHECK-LABEL: func.func @attention_grad_buffers
// CHECK: pisa.kernel.sparse_attention_grad_keys {{.*}} block_size = 32 scale = 1.250000e-01 {token_major} : memref<1x10x4x64xf16>
func.func @attention_grad_buffers(%q: memref<1x10x4x64xf16>, %k: memref<1x10x1x64xf16>, %v: memref<1x10x1x64xf16>, %s: memref<1x10x1x3xi32>, %off: index, %l: memref<1x10x4xf32>, %dd: memref<1x4x10xf32>, %do: memref<1x10x4x64xf16>, %dk: memref<1x10x1x64xf32>, %dv: memref<1x10x1x64xf32>, %index: memref<1x1x1x5xi32>, %list: memref<1x1x10x3xi32>, %acc: memref<1x1x10x128xf32>) {
  pisa.kernel.sparse_attention_grad_keys %q, %k, %v, %s, %off, %l, %dd, %do outs(%dk, %dv, %index, %list, %acc) block_size = 32 scale = 0.125 {token_major}
      : memref<1x10x4x64xf16>, memref<1x10x1x64xf16>, memref<1x10x1x64xf16>, memref<1x10x1x3xi32>, memref<1x10x4xf32>, memref<1x4x10xf32>, memref<1x10x4x64xf16>, memref<1x10x1x64xf32>, memref<1x10x1x64xf32>, memref<1x1x1x5xi32>, memref<1x1x10x3xi32>, memref<1x1x10x128xf32>
  return
}
