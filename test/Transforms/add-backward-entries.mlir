// RUN: pisa-opt %s --pisa-add-backward-entries --split-input-file | FileCheck %s --enable-var-scope
// Running it again changes nothing.
// RUN: pisa-opt %s --pisa-add-backward-entries --split-input-file | pisa-opt --pisa-add-backward-entries --split-input-file | FileCheck %s --enable-var-scope
// RUN: not pisa-opt %s --pisa-add-backward-entries=require --split-input-file 2>&1 >/dev/null | FileCheck %s --enable-var-scope --check-prefix=REQUIRE

// A sparse prefill (the selection computed in the program): F_forward
// returns the output, lse and selection; F_backward takes F's arguments,
// the selection, o, lse and dO and returns the gradients of q, k and v in
// their element types, with the forward's offset, block size and scale.

// CHECK-LABEL: func.func @prefill
// CHECK-SAME: attributes {pisa.backward = {backward = @prefill_backward, forward = @prefill_forward, inputs = array<i64: 0, 1, 2>, token_major = false}}
// CHECK: %[[O:.*]], %{{.*}} = pisa.sparse_attention
// CHECK: return %[[O]]

// CHECK-LABEL: func.func @prefill_forward
// CHECK-SAME: (%[[Q:.*]]: tensor<?x16x?x128xbf16>, %[[K:.*]]: tensor<?x1x?x128xbf16>, %[[V:.*]]: tensor<?x1x?x128xbf16>, %[[OFF:.*]]: index)
// CHECK-SAME: -> (tensor<?x16x?x128xbf16> {pisa.name = "o"}, tensor<?x16x?xf32> {pisa.name = "lse"}, tensor<?x1x?x8xi32> {pisa.name = "selection"})
// CHECK: %[[P:.*]] = pisa.pyramid_build %[[K]]
// CHECK: %[[S:.*]] = pisa.hier_topk %[[Q]], %[[K]], %[[P]], %[[OFF]]
// CHECK: %[[O2:.*]], %[[L:.*]] = pisa.sparse_attention %[[Q]], %[[K]], %[[V]], %[[S]], %[[OFF]] block_size = 64 scale = 1.250000e-01
// CHECK: return %[[O2]], %[[L]], %[[S]]

// CHECK-LABEL: func.func @prefill_backward
// CHECK-SAME: (%[[BQ:.*]]: tensor<?x16x?x128xbf16>, %[[BK:.*]]: tensor<?x1x?x128xbf16>, %[[BV:.*]]: tensor<?x1x?x128xbf16>, %[[BOFF:.*]]: index, %[[BS:.*]]: tensor<?x1x?x8xi32> {pisa.name = "selection"}, %[[BO:.*]]: tensor<?x16x?x128xbf16> {pisa.name = "o"}, %[[BL:.*]]: tensor<?x16x?xf32> {pisa.name = "lse"}, %[[BD:.*]]: tensor<?x16x?x128xbf16> {pisa.name = "grad_o"})
// CHECK-SAME: -> (tensor<?x16x?x128xbf16> {pisa.name = "dq"}, tensor<?x1x?x128xbf16> {pisa.name = "dk"}, tensor<?x1x?x128xbf16> {pisa.name = "dv"})
// CHECK-NOT: pisa.hier_topk
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = pisa.sparse_attention_grad %[[BQ]], %[[BK]], %[[BV]], %[[BS]], %[[BOFF]] out(%[[BO]], %[[BL]]) grad(%[[BD]]) block_size = 64 scale = 1.250000e-01
// CHECK-NEXT: return %[[DQ]], %[[DK]], %[[DV]]
func.func @prefill(%q: tensor<?x16x?x128xbf16>, %k: tensor<?x1x?x128xbf16>,
                   %v: tensor<?x1x?x128xbf16>, %offset: index)
    -> tensor<?x16x?x128xbf16> {
  %p = pisa.pyramid_build %k block_size = 64 branching = 2
      : tensor<?x1x?x128xbf16> -> tensor<?x1x?x128xf32>
  %sel = pisa.hier_topk %q, %k, %p, %offset topk = 8 block_size = 64 branching = 2
      : tensor<?x16x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x128xf32>
      -> tensor<?x1x?x8xi32>
  %o, %lse = pisa.sparse_attention %q, %k, %v, %sel, %offset block_size = 64 scale = 0.125
      : tensor<?x16x?x128xbf16>, tensor<?x1x?x128xbf16>, tensor<?x1x?x128xbf16>,
        tensor<?x1x?x8xi32> -> tensor<?x16x?x128xbf16>, tensor<?x16x?xf32>
  return %o : tensor<?x16x?x128xbf16>
}

// -----

// The selection an argument, the offset a constant, token-major: the
// forward returns o and lse only; the backward reads the selection among
// F's arguments and recomputes the constant; the layout is kept.

// CHECK-LABEL: func.func @given
// CHECK-SAME: inputs = array<i64: 1, 2, 3>, token_major = true
// CHECK-LABEL: func.func @given_forward
// CHECK-SAME: -> (tensor<2x64x4x32xf16> {pisa.name = "o"}, tensor<2x64x4xf32> {pisa.name = "lse"})
// CHECK-LABEL: func.func @given_backward
// CHECK-SAME: (%[[S:.*]]: tensor<2x64x2x4xi32>, %[[Q:.*]]: tensor<2x64x4x32xf16>, %[[K:.*]]: tensor<2x64x2x32xf16>, %[[V:.*]]: tensor<2x64x2x32xf16>, %[[O:.*]]: tensor<2x64x4x32xf16> {pisa.name = "o"}, %[[L:.*]]: tensor<2x64x4xf32> {pisa.name = "lse"}, %[[D:.*]]: tensor<2x64x4x32xf16> {pisa.name = "grad_o"})
// CHECK: %[[C:.*]] = arith.constant 0 : index
// CHECK: pisa.sparse_attention_grad %[[Q]], %[[K]], %[[V]], %[[S]], %[[C]] out(%[[O]], %[[L]]) grad(%[[D]]) block_size = 32 {token_major}
func.func @given(%s: tensor<2x64x2x4xi32>, %q: tensor<2x64x4x32xf16>,
                 %k: tensor<2x64x2x32xf16>, %v: tensor<2x64x2x32xf16>)
    -> tensor<2x64x4x32xf16> {
  %c0 = arith.constant 0 : index
  %o, %lse = pisa.sparse_attention %q, %k, %v, %s, %c0 block_size = 32 {token_major}
      : tensor<2x64x4x32xf16>, tensor<2x64x2x32xf16>, tensor<2x64x2x32xf16>,
        tensor<2x64x2x4xi32> -> tensor<2x64x4x32xf16>, tensor<2x64x4xf32>
  return %o : tensor<2x64x4x32xf16>
}

// -----

// Not an attention entry: it returns lse, or its queries are not an
// argument. Nothing is added.

// CHECK-LABEL: func.func @returns_lse
// CHECK-NOT: pisa.backward
// CHECK-NOT: func.func @returns_lse_forward
func.func @returns_lse(%q: tensor<1x2x64x32xf16>, %k: tensor<1x1x64x32xf16>,
                       %v: tensor<1x1x64x32xf16>, %s: tensor<1x1x64x2xi32>)
    -> tensor<1x2x64xf32> {
  %c0 = arith.constant 0 : index
  %o, %lse = pisa.sparse_attention %q, %k, %v, %s, %c0 block_size = 32
      : tensor<1x2x64x32xf16>, tensor<1x1x64x32xf16>, tensor<1x1x64x32xf16>,
        tensor<1x1x64x2xi32> -> tensor<1x2x64x32xf16>, tensor<1x2x64xf32>
  return %lse : tensor<1x2x64xf32>
}

// -----

// A backward the GPU lowering refuses (its tiles exceed a block's shared
// memory): without `require` the entry says why and gets no training
// entries; with it, the pass fails naming the op.

// CHECK-LABEL: func.func @big
// CHECK-SAME: pisa.no_backward = "needs {{[0-9]+}} bytes of shared memory per block for the backward, above the 232448 an sm_90 block may use"
// CHECK-NOT: func.func @big_backward
// REQUIRE-NOT: error
// REQUIRE: error: 'pisa.sparse_attention' op has no GPU backward: needs {{[0-9]+}} bytes of shared memory
// REQUIRE-NOT: error
func.func @big(%q: tensor<1x4x256x256xf16>, %k: tensor<1x1x256x256xf16>,
               %v: tensor<1x1x256x256xf16>, %s: tensor<1x1x256x4xi32>)
    -> tensor<1x4x256x256xf16> {
  %c0 = arith.constant 0 : index
  %o, %lse = pisa.sparse_attention %q, %k, %v, %s, %c0 block_size = 64
      : tensor<1x4x256x256xf16>, tensor<1x1x256x256xf16>, tensor<1x1x256x256xf16>,
        tensor<1x1x256x4xi32> -> tensor<1x4x256x256xf16>, tensor<1x4x256xf32>
  return %o : tensor<1x4x256x256xf16>
}

// -----

// Packed varlen attention: F_backward is pisa.sparse_attention_grad_varlen
// with F's cu_seqlens (and the selection F computed); token-major.

// CHECK-LABEL: func.func @packed
// CHECK-SAME: attributes {pisa.backward = {backward = @packed_backward, forward = @packed_forward, inputs = array<i64: 0, 1, 2>, token_major = true}}
// CHECK-LABEL: func.func @packed_forward
// CHECK-SAME: -> (tensor<?x4x32xf16> {pisa.name = "o"}, tensor<?x4xf32> {pisa.name = "lse"}, tensor<?x1x4xi32> {pisa.name = "selection"})
// CHECK: pisa.hier_topk_varlen
// CHECK: pisa.sparse_attention_varlen
// CHECK-LABEL: func.func @packed_backward
// CHECK-SAME: (%[[Q:.*]]: tensor<?x4x32xf16>, %[[K:.*]]: tensor<?x1x32xf16>, %[[V:.*]]: tensor<?x1x32xf16>, %[[CQ:.*]]: tensor<?xi32>, %[[CK:.*]]: tensor<?xi32>, %[[S:.*]]: tensor<?x1x4xi32> {pisa.name = "selection"}, %[[O:.*]]: tensor<?x4x32xf16> {pisa.name = "o"}, %[[L:.*]]: tensor<?x4xf32> {pisa.name = "lse"}, %[[D:.*]]: tensor<?x4x32xf16> {pisa.name = "grad_o"})
// CHECK-NOT: pisa.hier_topk_varlen
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = pisa.sparse_attention_grad_varlen %[[Q]], %[[K]], %[[V]], %[[S]] cu_seqlens(%[[CQ]], %[[CK]]) out(%[[O]], %[[L]]) grad(%[[D]]) block_size = 32
// CHECK-NEXT: return %[[DQ]], %[[DK]], %[[DV]]
func.func @packed(%q: tensor<?x4x32xf16>, %k: tensor<?x1x32xf16>, %v: tensor<?x1x32xf16>,
                  %cuq: tensor<?xi32>, %cuk: tensor<?xi32>) -> tensor<?x4x32xf16> {
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cuk) block_size = 32 branching = 2
      : tensor<?x1x32xf16>, tensor<?xi32> -> tensor<?x1x32xf32>
  %s = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = 4 block_size = 32
      branching = 2 : tensor<?x4x32xf16>, tensor<?x1x32xf16>, tensor<?x1x32xf32>,
      tensor<?xi32>, tensor<?xi32> -> tensor<?x1x4xi32>
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cuq, %cuk) block_size = 32
      : tensor<?x4x32xf16>, tensor<?x1x32xf16>, tensor<?x1x32xf16>, tensor<?x1x4xi32>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x4x32xf16>, tensor<?x4xf32>
  return %o : tensor<?x4x32xf16>
}
