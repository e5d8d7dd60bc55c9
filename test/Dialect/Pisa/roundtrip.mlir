// RUN: pisa-opt %s --allow-unregistered-dialect | pisa-opt --allow-unregistered-dialect | FileCheck %s --enable-var-scope
// RUN: pisa-opt %s --allow-unregistered-dialect --mlir-print-op-generic | pisa-opt --allow-unregistered-dialect | FileCheck %s --enable-var-scope

// CHECK-LABEL: func.func @pyramid
// CHECK-SAME: (%[[K:.*]]: tensor<1x2x200x64xf16>)
// CHECK: %[[P:.*]] = pisa.pyramid_build %[[K]] block_size = 64 branching = 2 : tensor<1x2x200x64xf16> -> tensor<1x2x7x64xf32>
// CHECK: return %[[P]]
func.func @pyramid(%k: tensor<1x2x200x64xf16>) -> tensor<1x2x7x64xf32> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2
      : tensor<1x2x200x64xf16> -> tensor<1x2x7x64xf32>
  return %p : tensor<1x2x7x64xf32>
}

// CHECK-LABEL: func.func @pyramid_dynamic
// CHECK: pisa.pyramid_build %{{.*}} block_size = 8 branching = 4 : tensor<?x3x?x16xbf16> -> tensor<?x3x?x16xf32>
func.func @pyramid_dynamic(%k: tensor<?x3x?x16xbf16>) -> tensor<?x3x?x16xf32> {
  %p = pisa.pyramid_build %k block_size = 8 branching = 4
      : tensor<?x3x?x16xbf16> -> tensor<?x3x?x16xf32>
  return %p : tensor<?x3x?x16xf32>
}

// CHECK-LABEL: func.func @select_dynamic
// CHECK: pisa.hier_topk {{.*}} : tensor<?x8x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf32> -> tensor<?x2x?x8xi32>
func.func @select_dynamic(%q: tensor<?x8x?x64xf16>, %k: tensor<?x2x?x64xf16>,
                          %p: tensor<?x2x?x64xf32>, %off: index) -> tensor<?x2x?x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 16 branching = 2
      : tensor<?x8x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf32> -> tensor<?x2x?x8xi32>
  return %s : tensor<?x2x?x8xi32>
}

// CHECK-LABEL: func.func @score_leaves
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x128x64xf32>, %[[K:.*]]: tensor<1x1x128x64xf32>, %[[C:.*]]: tensor<1x1x128x16xi32>, %[[OFF:.*]]: index)
// CHECK: pisa.lse_score %[[Q]], %[[K]], %[[C]], %[[OFF]] level = 1 block_size = 64 branching = 2 : tensor<1x4x128x64xf32>, tensor<1x1x128x64xf32>, tensor<1x1x128x16xi32> -> tensor<1x1x128x16xf32>
func.func @score_leaves(%q: tensor<1x4x128x64xf32>, %k: tensor<1x1x128x64xf32>,
                        %c: tensor<1x1x128x16xi32>, %off: index) -> tensor<1x1x128x16xf32> {
  %u = pisa.lse_score %q, %k, %c, %off level = 1 block_size = 64 branching = 2
      : tensor<1x4x128x64xf32>, tensor<1x1x128x64xf32>, tensor<1x1x128x16xi32>
      -> tensor<1x1x128x16xf32>
  return %u : tensor<1x1x128x16xf32>
}

// CHECK-LABEL: func.func @score_summaries
// CHECK: pisa.lse_score %{{.*}} level = 3 block_size = 32 branching = 4 scale = 2.500000e-01 : tensor<2x6x10x16xbf16>, tensor<2x3x5x16xf32>, tensor<2x3x10x8xi32> -> tensor<2x3x10x8xf32>
func.func @score_summaries(%q: tensor<2x6x10x16xbf16>, %s: tensor<2x3x5x16xf32>,
                           %c: tensor<2x3x10x8xi32>, %off: index) -> tensor<2x3x10x8xf32> {
  %u = pisa.lse_score %q, %s, %c, %off level = 3 block_size = 32 branching = 4 scale = 0.25
      : tensor<2x6x10x16xbf16>, tensor<2x3x5x16xf32>, tensor<2x3x10x8xi32>
      -> tensor<2x3x10x8xf32>
  return %u : tensor<2x3x10x8xf32>
}

// CHECK-LABEL: func.func @select
// CHECK-SAME: (%[[Q:.*]]: tensor<1x16x4096x128xbf16>, %[[K:.*]]: tensor<1x1x4096x128xbf16>, %[[P:.*]]: tensor<1x1x127x128xf32>, %[[OFF:.*]]: index)
// CHECK: pisa.hier_topk %[[Q]], %[[K]], %[[P]], %[[OFF]] topk = 8 block_size = 64 branching = 2 :
// CHECK-SAME: -> tensor<1x1x4096x8xi32>
func.func @select(%q: tensor<1x16x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
                  %p: tensor<1x1x127x128xf32>, %off: index) -> tensor<1x1x4096x8xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x127x128xf32>
      -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}

// CHECK-LABEL: func.func @select_scheduled
// CHECK: pisa.hier_topk %{{.*}} topk = 4 block_size = 64 branching = 2 scale = 1.250000e-01 {schedule = #pisa.schedule<single_stage, q_tile = 4, io_two_stage = 512, io_single_stage = 4096>} :
func.func @select_scheduled(%q: tensor<1x1x1x64xf16>, %k: tensor<1x1x300x64xf16>,
                            %p: tensor<1x1x11x64xf32>, %off: index) -> tensor<1x1x1x4xi32> {
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 64 branching = 2 scale = 0.125
      {schedule = #pisa.schedule<single_stage, q_tile = 4, io_two_stage = 512, io_single_stage = 4096>}
      : tensor<1x1x1x64xf16>, tensor<1x1x300x64xf16>, tensor<1x1x11x64xf32>
      -> tensor<1x1x1x4xi32>
  return %s : tensor<1x1x1x4xi32>
}

// CHECK-LABEL: func.func @schedule_attr
// CHECK: "test.use"() {s = #pisa.schedule<two_stage, q_tile = 2, io_two_stage = 10, io_single_stage = 20>}
func.func @schedule_attr() {
  "test.use"() {s = #pisa.schedule<two_stage, q_tile = 2, io_two_stage = 10, io_single_stage = 20>} : () -> ()
  return
}

// CHECK-LABEL: func.func @attend
// CHECK: %{{.*}}, %{{.*}} = pisa.sparse_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} block_size = 64 scale = 1.250000e-01 : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x2x?x4xi32> -> tensor<?x8x?x32xbf16>, tensor<?x8x?xf32>
func.func @attend(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x2x?x64xbf16>, %v: tensor<?x2x?x32xbf16>,
                  %s: tensor<?x2x?x4xi32>, %off: index) -> (tensor<?x8x?x32xbf16>, tensor<?x8x?xf32>) {
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = 64 scale = 0.125
      : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x32xbf16>, tensor<?x2x?x4xi32>
      -> tensor<?x8x?x32xbf16>, tensor<?x8x?xf32>
  return %o, %l : tensor<?x8x?x32xbf16>, tensor<?x8x?xf32>
}

// CHECK-LABEL: func.func @attend_grad
// CHECK-SAME: (%[[Q:[^:]*]]: {{[^,]*}}, %[[K:[^:]*]]: {{[^,]*}}, %[[V:[^:]*]]: {{[^,]*}}, %[[S:[^:]*]]: {{[^,]*}}, %[[O:[^:]*]]: {{[^,]*}}, %[[L:[^:]*]]: {{[^,]*}}, %[[DO:[^:]*]]: {{[^,]*}}, %[[OFF:[^:]*]]: index)
// CHECK: pisa.sparse_attention_grad %[[Q]], %[[K]], %[[V]], %[[S]], %[[OFF]] out(%[[O]], %[[L]]) grad(%[[DO]]) block_size = 64 scale = 1.250000e-01 {token_major} : tensor<?x?x8x64xbf16>, tensor<?x?x2x64xbf16>, tensor<?x?x2x32xbf16>, tensor<?x?x2x4xi32>, tensor<?x?x8x32xbf16>, tensor<?x?x8xf32>, tensor<?x?x8x32xbf16> -> tensor<?x?x8x64xf32>, tensor<?x?x2x64xbf16>, tensor<?x?x2x32xf32>
func.func @attend_grad(%q: tensor<?x?x8x64xbf16>, %k: tensor<?x?x2x64xbf16>, %v: tensor<?x?x2x32xbf16>,
                       %s: tensor<?x?x2x4xi32>, %o: tensor<?x?x8x32xbf16>, %l: tensor<?x?x8xf32>,
                       %do: tensor<?x?x8x32xbf16>, %off: index)
    -> (tensor<?x?x8x64xf32>, tensor<?x?x2x64xbf16>, tensor<?x?x2x32xf32>) {
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do)
      block_size = 64 scale = 0.125 {token_major}
      : tensor<?x?x8x64xbf16>, tensor<?x?x2x64xbf16>, tensor<?x?x2x32xbf16>, tensor<?x?x2x4xi32>,
        tensor<?x?x8x32xbf16>, tensor<?x?x8xf32>, tensor<?x?x8x32xbf16>
      -> tensor<?x?x8x64xf32>, tensor<?x?x2x64xbf16>, tensor<?x?x2x32xf32>
  return %dq, %dk, %dv : tensor<?x?x8x64xf32>, tensor<?x?x2x64xbf16>, tensor<?x?x2x32xf32>
}

// CHECK-LABEL: func.func @append
// CHECK: pisa.pyramid_append %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} block_size = 64 branching = 2 : tensor<4x2x4096x64xbf16>, tensor<4x2x127x64xf32>, tensor<4xi32>, tensor<4xi32> -> tensor<4x2x127x64xf32>
func.func @append(%k: tensor<4x2x4096x64xbf16>, %p: tensor<4x2x127x64xf32>,
                  %from: tensor<4xi32>, %to: tensor<4xi32>) -> tensor<4x2x127x64xf32> {
  %r = pisa.pyramid_append %k, %p, %from, %to block_size = 64 branching = 2
      : tensor<4x2x4096x64xbf16>, tensor<4x2x127x64xf32>, tensor<4xi32>, tensor<4xi32>
      -> tensor<4x2x127x64xf32>
  return %r : tensor<4x2x127x64xf32>
}

// CHECK-LABEL: func.func @decode_select
// CHECK: pisa.decode_select %{{.*}}, %{{.*}}, %{{.*}} seq_lens(%{{.*}}) topk = 8 block_size = 64 branching = 2 scale = 1.250000e-01 : tensor<?x16x2x64xbf16>, tensor<?x2x4096x64xbf16>, tensor<?x2x127x64xf32>, tensor<?xi32> -> tensor<?x2x2x8xi32>
func.func @decode_select(%q: tensor<?x16x2x64xbf16>, %k: tensor<?x2x4096x64xbf16>,
                         %p: tensor<?x2x127x64xf32>, %n: tensor<?xi32>) -> tensor<?x2x2x8xi32> {
  %s = pisa.decode_select %q, %k, %p seq_lens(%n) topk = 8 block_size = 64 branching = 2 scale = 0.125
      : tensor<?x16x2x64xbf16>, tensor<?x2x4096x64xbf16>, tensor<?x2x127x64xf32>, tensor<?xi32>
      -> tensor<?x2x2x8xi32>
  return %s : tensor<?x2x2x8xi32>
}

// Paged key caches: a pool of pages [P, S, Hkv, d] and a block table.
// CHECK-LABEL: func.func @paged
// CHECK: pisa.pyramid_append %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} block_table(%{{.*}} : tensor<?x128xi32>) block_size = 64 branching = 2 : tensor<?x16x2x64xbf16>, tensor<?x2x63x64xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x2x63x64xf32>
// CHECK: pisa.decode_select %{{.*}}, %{{.*}}, %{{.*}} seq_lens(%{{.*}}) block_table(%{{.*}} : tensor<?x128xi32>) topk = 8 block_size = 64 branching = 2 : tensor<?x16x1x64xbf16>, tensor<?x16x2x64xbf16>, tensor<?x2x63x64xf32>, tensor<?xi32> -> tensor<?x2x1x8xi32>
func.func @paged(%q: tensor<?x16x1x64xbf16>, %pages: tensor<?x16x2x64xbf16>, %p: tensor<?x2x63x64xf32>,
                 %from: tensor<?xi32>, %to: tensor<?xi32>, %bt: tensor<?x128xi32>) -> tensor<?x2x1x8xi32> {
  %p1 = pisa.pyramid_append %pages, %p, %from, %to block_table(%bt : tensor<?x128xi32>) block_size = 64 branching = 2
      : tensor<?x16x2x64xbf16>, tensor<?x2x63x64xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x2x63x64xf32>
  %s = pisa.decode_select %q, %pages, %p1 seq_lens(%to) block_table(%bt : tensor<?x128xi32>) topk = 8 block_size = 64 branching = 2
      : tensor<?x16x1x64xbf16>, tensor<?x16x2x64xbf16>, tensor<?x2x63x64xf32>, tensor<?xi32> -> tensor<?x2x1x8xi32>
  return %s : tensor<?x2x1x8xi32>
}
