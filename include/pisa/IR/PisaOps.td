//===- PisaOps.td - PISA operations ------------------------*- tablegen -*-===//
//
// The three ops of PISA block selection. Shapes follow the attention
// convention [B, H, N, d]; the exact contract is docs/semantics.md.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_IR_PISAOPS_TD
#define PISA_IR_PISAOPS_TD

include "pisa/IR/PisaDialect.td"
include "pisa/IR/PisaAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"

def Pisa_FloatTensor4D : 4DTensorOf<[F32, F16, BF16]>;

def Pisa_PyramidBuildOp : Pisa_Op<"pyramid_build", [Pure]> {
  let summary = "mean-pooled key pyramid, all levels packed in one tensor";
  let description = [{
    Builds the summaries of every pyramid level above the raw keys. Level 1
    (the leaves) holds M_1 = ceil(N / C) block means, the last block
    averaging only the keys it has; level l+1 holds ceil(M_l / g) nodes,
    each the unweighted mean of its existing children; the last level has
    one node. Accumulation is in f32 whatever the key type.

    The result packs the levels along dimension 2, leaves first:
    `[B, Hkv, P, d]` with P = M_1 + M_2 + ... + M_L. Level offsets follow
    from N, C and g alone, so no side table is needed.

    ```mlir
    %p = pisa.pyramid_build %k block_size = 64 branching = 2
        : tensor<1x2x200x64xf16> -> tensor<1x2x7x64xf32>
    ```
    (200 keys, C = 64: 4 leaves, 2 nodes, 1 root.) With `token_major` the
    keys are `[B, N, Hkv, d]` (FlashAttention's layout); the pyramid is
    `[B, Hkv, P, d]` either way.
  }];
  let arguments = (ins Pisa_FloatTensor4D:$keys, I64Attr:$block_size,
                       I64Attr:$branching, UnitAttr:$token_major);
  let results = (outs 4DTensorOf<[F32]>:$pyramid);
  let assemblyFormat = [{
    $keys `block_size` `=` $block_size `branching` `=` $branching attr-dict
    `:` type($keys) `->` type($pyramid)
  }];
  let hasVerifier = 1;
}

def Pisa_LseScoreOp : Pisa_Op<"lse_score", [Pure]> {
  let summary = "group-summed LogSumExp scores of candidate pyramid nodes";
  let description = [{
    For every query i (position t = query_offset + i), KV head and candidate
    node n of pyramid level `level`, computes

        u = sum over the G query heads h of the group of
            log sum_{r child of n, first key of r <= t} exp(scale * q_h . kbar_r)

    `children` holds the summaries one level down: the raw keys
    `[B, Hkv, N, d]` when `level` = 1, else that level's f32 summaries
    `[B, Hkv, M_{level-1}, d]`. Children that do not exist (past the end) are
    skipped; an empty sum and a candidate of -1 give -inf.
    `scale` defaults to 1/sqrt(d).

    ```mlir
    %u = pisa.lse_score %q, %k, %cand, %off level = 1 block_size = 64
        branching = 2 : tensor<1x4x128x64xf32>, tensor<1x1x128x64xf32>,
        tensor<1x1x128x16xi32> -> tensor<1x1x128x16xf32>
    ```
  }];
  let arguments = (ins Pisa_FloatTensor4D:$queries,
                       Pisa_FloatTensor4D:$children,
                       4DTensorOf<[I32]>:$candidates, Index:$query_offset,
                       I64Attr:$level, I64Attr:$block_size, I64Attr:$branching,
                       OptionalAttr<F32Attr>:$scale);
  let results = (outs 4DTensorOf<[F32]>:$scores);
  let assemblyFormat = [{
    $queries `,` $children `,` $candidates `,` $query_offset
    `level` `=` $level `block_size` `=` $block_size `branching` `=` $branching
    (`scale` `=` $scale^)? attr-dict
    `:` type($queries) `,` type($children) `,` type($candidates)
    `->` type($scores)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The logit scale: the attribute, else 1/sqrt(d).
    float getScaleOrDefault();
  }];
}

def Pisa_HierTopKOp : Pisa_Op<"hier_topk", [Pure]> {
  let summary = "coarse-to-fine top-K selection of leaf key blocks";
  let description = [{
    For every query i (position t = query_offset + i) and KV head, walks the
    pyramid from the root: at each level it keeps the `topk` nodes with the
    highest group-summed LSE score among the expanded candidates whose first
    leaf is causal (all of them, unscored, when there are at most `topk`),
    and expands their children. At the leaves it keeps the forced blocks
    {0, b_t - 1, b_t} and fills up to `topk` with the best scored others.
    Ties go to the lower index. The result lists the kept leaf block
    indices ascending, padded with -1: `[B, Hkv, Nq, K]`.

    `schedule` is attached by `--pisa-select-schedule` and read by the
    lowerings. With `capacity`, the pyramid is a cache laid out for that
    many keys (as `pisa.pyramid_append` keeps it) and holds the pyramid of
    the N keys given; without it, the layout of N (`pisa.pyramid_build`).
    With `token_major`, queries, keys and the selection are token-major,
    `[B, Nq, Hq, d]`, `[B, N, Hkv, d]` and `[B, Nq, Hkv, K]`; the pyramid
    stays `[B, Hkv, P, d]` (docs/semantics.md, "Layouts").

    ```mlir
    %sel = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64
        branching = 2 : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>,
        tensor<1x1x127x128xf32> -> tensor<1x1x4096x8xi32>
    ```
  }];
  let arguments = (ins Pisa_FloatTensor4D:$queries, Pisa_FloatTensor4D:$keys,
                       4DTensorOf<[F32]>:$pyramid, Index:$query_offset,
                       I64Attr:$topk, I64Attr:$block_size, I64Attr:$branching,
                       OptionalAttr<F32Attr>:$scale,
                       OptionalAttr<Pisa_ScheduleAttr>:$schedule,
                       OptionalAttr<I64Attr>:$capacity,
                       UnitAttr:$token_major);
  let results = (outs 4DTensorOf<[I32]>:$selection);
  let assemblyFormat = [{
    $queries `,` $keys `,` $pyramid `,` $query_offset
    `topk` `=` $topk `block_size` `=` $block_size `branching` `=` $branching
    (`scale` `=` $scale^)? (`capacity` `=` $capacity^)? attr-dict
    `:` type($queries) `,` type($keys) `,` type($pyramid)
    `->` type($selection)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The logit scale: the attribute, else 1/sqrt(d).
    float getScaleOrDefault();
  }];
}

def Pisa_PyramidAppendOp : Pisa_Op<"pyramid_append", [Pure]> {
  let summary = "update a cached key pyramid for appended keys";
  let description = [{
    `pyramid` is a pyramid cache in the packed layout of `pisa.pyramid_build`
    for the key cache's capacity Ncap (dimension 2 of `keys`): level l at
    rows offset_l(Ncap) .. offset_l(Ncap) + M_l(Ncap) - 1. For sequence b
    it holds the pyramid of keys 0 .. from[b] - 1 (node i of level l at
    row offset_l(Ncap) + i, for i < M_l(from[b])); keys from[b] .. to[b] - 1
    have been written to `keys`. The result holds the pyramid of keys
    0 .. to[b] - 1: only the leaves containing new keys and their ancestors
    are recomputed (O(C d + g d log N) per appended token), each from its
    keys or children in row order, so the rows are bitwise equal to what
    `pisa.pyramid_build` computes over the same keys (docs/semantics.md,
    section 4). Other rows are unchanged. A sequence with from[b] < 0,
    from[b] > to[b] or to[b] > Ncap is left unchanged (tools reject it).
    With `block_table` (`[B, Mp]` i32) the keys are a paged cache, a pool
    `[P, S, Hkv, d]` of pages of S keys: sequence b's key j is
    keys[block_table[b, j / S], j % S], and Ncap = Mp * S; a sequence whose
    pages below to[b] are outside [0, P) is left unchanged.

    ```mlir
    %p1 = pisa.pyramid_append %kcache, %p0, %from, %to block_size = 64
        branching = 2 : tensor<4x8x131072x128xbf16>, tensor<4x8x4095x128xf32>,
        tensor<4xi32>, tensor<4xi32> -> tensor<4x8x4095x128xf32>
    ```
  }];
  let arguments = (ins Pisa_FloatTensor4D:$keys, 4DTensorOf<[F32]>:$pyramid,
                       1DTensorOf<[I32]>:$from, 1DTensorOf<[I32]>:$to,
                       Optional<2DTensorOf<[I32]>>:$block_table,
                       I64Attr:$block_size, I64Attr:$branching);
  let results = (outs 4DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $keys `,` $pyramid `,` $from `,` $to
    (`block_table` `(` $block_table^ `:` type($block_table) `)`)?
    `block_size` `=` $block_size `branching` `=` $branching attr-dict
    `:` type($keys) `,` type($pyramid) `,` type($from) `,` type($to)
    `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Ncap: the keys' dimension 2, or Mp * S for a paged cache.
    int64_t getCapacity();
  }];
}

def Pisa_DecodeSelectOp : Pisa_Op<"decode_select", [Pure]> {
  let summary = "selection for B sequences of their own lengths over caches";
  let description = [{
    Batched decode (docs/semantics.md, section 4): `keys` `[B, Hkv, Ncap, d]`
    and `pyramid` (`pisa.pyramid_append`'s caches, the layout of Ncap
    keys) hold sequence b's first N_b = seq_lens[b] keys and their
    pyramid; its Nq queries are its last Nq positions, t = N_b - Nq + i.
    Row b is exactly `pisa.hier_topk ... capacity = Ncap` of sequence b's
    keys 0 .. N_b - 1 with query_offset N_b - Nq. A sequence with N_b < Nq
    or N_b > Ncap gets every row as K entries of -2 (not a leaf, not
    padding); tools refuse such lengths. The GPU lowering runs the
    single-stage kernel, one warp per (query, KV head), each finding its
    sequence's length on the device. With `block_table` (`[B, Mp]` i32) the
    keys are a paged cache `[P, S, Hkv, d]` as for `pisa.pyramid_append`
    (Ncap = Mp * S; a page below N_b outside [0, P) makes the sequence's
    rows -2), on both lowerings.

    ```mlir
    %sel = pisa.decode_select %q, %kc, %pc seq_lens(%n) topk = 8
        block_size = 64 branching = 2 : tensor<64x16x1x128xbf16>,
        tensor<64x1x32768x128xbf16>, tensor<64x1x1023x128xf32>,
        tensor<64xi32> -> tensor<64x1x1x8xi32>
    ```
  }];
  let arguments = (ins Pisa_FloatTensor4D:$queries, Pisa_FloatTensor4D:$keys,
                       4DTensorOf<[F32]>:$pyramid, 1DTensorOf<[I32]>:$seq_lens,
                       Optional<2DTensorOf<[I32]>>:$block_table,
                       I64Attr:$topk, I64Attr:$block_size, I64Attr:$branching,
                       OptionalAttr<F32Attr>:$scale);
  let results = (outs 4DTensorOf<[I32]>:$selection);
  let assemblyFormat = [{
    $queries `,` $keys `,` $pyramid `seq_lens` `(` $seq_lens `)`
    (`block_table` `(` $block_table^ `:` type($block_table) `)`)?
    `topk` `=` $topk `block_size` `=` $block_size `branching` `=` $branching
    (`scale` `=` $scale^)? attr-dict
    `:` type($queries) `,` type($keys) `,` type($pyramid) `,`
    type($seq_lens) `->` type($selection)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The logit scale: the attribute, else 1/sqrt(d).
    float getScaleOrDefault();
    /// Ncap: the keys cache's dimension 2, or Mp * S for a paged cache.
    int64_t getCapacity();
    /// Hkv: the keys' dimension 1, or 2 for a paged cache.
    int64_t getKvHeads();
  }];
}

def Pisa_SparseAttentionOp : Pisa_Op<"sparse_attention", [Pure]> {
  let summary = "causal attention over the selected key blocks";
  let description = [{
    For every query i (position t = query_offset + i) and query head h
    (KV head h / G), attends to the keys j <= t of the leaf blocks listed
    in `selection[b, h / G, i, :]` (block s holds keys sC .. sC + C - 1):

        o = sum_j softmax_j(scale * q . k_j) v_j,
        lse = log sum_j exp(scale * q . k_j)

    accumulated in f32; `output` has the queries' element type. Entries are
    taken in order and an entry is ignored when it is -1, outside
    [0, ceil(N / C)), or not greater than the last entry used (so a row
    from `pisa.hier_topk` is used whole and duplicates count once). A row
    with no key gives zeros and lse = -inf. `scale` defaults to 1/sqrt(d).
    With `token_major` the queries, keys, values, selection and output are
    `[B, T, H, X]` and lse is `[B, Nq, Hq]`. docs/semantics.md, section 6,
    is the contract.

    ```mlir
    %o, %lse = pisa.sparse_attention %q, %k, %v, %sel, %off block_size = 64
        : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>,
          tensor<1x1x4096x128xbf16>, tensor<1x1x4096x8xi32>
        -> tensor<1x16x4096x128xbf16>, tensor<1x16x4096xf32>
    ```
  }];
  let arguments = (ins Pisa_FloatTensor4D:$queries, Pisa_FloatTensor4D:$keys,
                       Pisa_FloatTensor4D:$values,
                       4DTensorOf<[I32]>:$selection, Index:$query_offset,
                       I64Attr:$block_size, OptionalAttr<F32Attr>:$scale,
                       UnitAttr:$token_major);
  let results = (outs Pisa_FloatTensor4D:$output, 3DTensorOf<[F32]>:$lse);
  let assemblyFormat = [{
    $queries `,` $keys `,` $values `,` $selection `,` $query_offset
    `block_size` `=` $block_size (`scale` `=` $scale^)? attr-dict
    `:` type($queries) `,` type($keys) `,` type($values) `,` type($selection)
    `->` type($output) `,` type($lse)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The logit scale: the attribute, else 1/sqrt(d).
    float getScaleOrDefault();
  }];
}

def Pisa_SparseAttentionGradOp : Pisa_Op<"sparse_attention_grad", [Pure]> {
  let summary = "the backward of pisa.sparse_attention";
  let description = [{
    Given the forward's operands (queries, keys, values, selection, query
    offset, block size, scale, layout), its results `output` and `lse`, and
    `grad_output` (dO, the gradient of a loss with respect to `output`),
    returns the gradients with respect to the queries, keys and values, in
    their shapes (element type f32 or that of the queries):

        P_j = exp(scale * q . k_j - lse)      (0 when lse = -inf)
        dS_j = P_j (dO . v_j - dO . o)
        dq = scale * sum_j dS_j k_j
        dk_j = scale * sum dS_j q,  dv_j = sum P_j dO

    over the keys j each query attends in the forward (the same entries,
    the same causal mask); dk and dv of a KV head sum over its G query
    heads and every query attending the key, and are 0 for a key no query
    attends. The selection gets no gradient. docs/semantics.md, section
    6.1, is the contract.

    ```mlir
    %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %sel, %off
        out(%o, %lse) grad(%do) block_size = 64
        : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>,
          tensor<1x1x4096x128xbf16>, tensor<1x1x4096x8xi32>,
          tensor<1x16x4096x128xbf16>, tensor<1x16x4096xf32>,
          tensor<1x16x4096x128xbf16>
        -> tensor<1x16x4096x128xf32>, tensor<1x1x4096x128xf32>,
           tensor<1x1x4096x128xf32>
    ```
  }];
  let arguments = (ins Pisa_FloatTensor4D:$queries, Pisa_FloatTensor4D:$keys,
                       Pisa_FloatTensor4D:$values,
                       4DTensorOf<[I32]>:$selection, Index:$query_offset,
                       Pisa_FloatTensor4D:$output, 3DTensorOf<[F32]>:$lse,
                       Pisa_FloatTensor4D:$grad_output,
                       I64Attr:$block_size, OptionalAttr<F32Attr>:$scale,
                       UnitAttr:$token_major);
  let results = (outs Pisa_FloatTensor4D:$grad_queries,
                      Pisa_FloatTensor4D:$grad_keys,
                      Pisa_FloatTensor4D:$grad_values);
  let assemblyFormat = [{
    $queries `,` $keys `,` $values `,` $selection `,` $query_offset
    `out` `(` $output `,` $lse `)` `grad` `(` $grad_output `)`
    `block_size` `=` $block_size (`scale` `=` $scale^)? attr-dict
    `:` type($queries) `,` type($keys) `,` type($values) `,` type($selection)
    `,` type($output) `,` type($lse) `,` type($grad_output)
    `->` type($grad_queries) `,` type($grad_keys) `,` type($grad_values)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The logit scale: the attribute, else 1/sqrt(d).
    float getScaleOrDefault();
  }];
}

def Pisa_FloatTensor3D : 3DTensorOf<[F32, F16, BF16]>;

def Pisa_PyramidBuildVarlenOp : Pisa_Op<"pyramid_build_varlen", [Pure]> {
  let summary = "the key pyramids of a packed batch of variable lengths";
  let description = [{
    `keys` packs B sequences token-major, `[Tk, Hkv, d]`: sequence b's keys
    are rows `cu_seqlens[b] .. cu_seqlens[b+1] - 1` (`cu_seqlens` is
    `[B + 1]`, from 0, non-decreasing, ending at Tk). The result holds each
    sequence's `pisa.pyramid_build` (levels packed leaves first), token-major
    `[R, Hkv, d]`, sequence b at rows R_b = 2 floor(cu_seqlens[b] / C) + 32 b,
    R = 2 floor(Tk / C) + 32 B; rows between sequences are unspecified
    (docs/semantics.md, section 7).

    ```mlir
    %p = pisa.pyramid_build_varlen %k cu_seqlens(%cu) block_size = 64
        branching = 2 : tensor<1000x2x64xf16>, tensor<4xi32> -> tensor<126x2x64xf32>
    ```
  }];
  let arguments = (ins Pisa_FloatTensor3D:$keys, 1DTensorOf<[I32]>:$cu_seqlens,
                       I64Attr:$block_size, I64Attr:$branching);
  let results = (outs 3DTensorOf<[F32]>:$pyramid);
  let assemblyFormat = [{
    $keys `cu_seqlens` `(` $cu_seqlens `)` `block_size` `=` $block_size
    `branching` `=` $branching attr-dict
    `:` type($keys) `,` type($cu_seqlens) `->` type($pyramid)
  }];
  let hasVerifier = 1;
}

def Pisa_HierTopKVarlenOp : Pisa_Op<"hier_topk_varlen", [Pure]> {
  let summary = "coarse-to-fine top-K over a packed batch of variable lengths";
  let description = [{
    `pisa.hier_topk` for each sequence of a packed batch (docs/semantics.md,
    section 7): queries `[Tq, Hq, d]` and keys `[Tk, Hkv, d]` token-major,
    sequence b's rows given by `cu_seqlens_q` and `cu_seqlens_k` (`[B + 1]`
    each); its Nq_b queries are its last positions, query i at
    t = N_b - Nq_b + i (prefill, chunked prefill and decode mix in one
    batch); `pyramid` is `pisa.pyramid_build_varlen` of the keys. The result
    `[Tq, Hkv, K]` lists, per query row, the kept leaf blocks of its own
    sequence, ascending, padded with -1. `schedule`, as on
    `pisa.hier_topk`, is set by --pisa-select-schedule for the GPU
    lowering.

    ```mlir
    %sel = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = 8
        block_size = 64 branching = 2 : tensor<1010x8x64xf16>,
        tensor<1000x2x64xf16>, tensor<126x2x64xf32>, tensor<4xi32>,
        tensor<4xi32> -> tensor<1010x2x8xi32>
    ```
  }];
  let arguments = (ins Pisa_FloatTensor3D:$queries, Pisa_FloatTensor3D:$keys,
                       3DTensorOf<[F32]>:$pyramid,
                       1DTensorOf<[I32]>:$cu_seqlens_q,
                       1DTensorOf<[I32]>:$cu_seqlens_k,
                       I64Attr:$topk, I64Attr:$block_size, I64Attr:$branching,
                       OptionalAttr<F32Attr>:$scale,
                       OptionalAttr<Pisa_ScheduleAttr>:$schedule);
  let results = (outs 3DTensorOf<[I32]>:$selection);
  let assemblyFormat = [{
    $queries `,` $keys `,` $pyramid `cu_seqlens` `(` $cu_seqlens_q `,`
    $cu_seqlens_k `)` `topk` `=` $topk `block_size` `=` $block_size
    `branching` `=` $branching (`scale` `=` $scale^)? attr-dict
    `:` type($queries) `,` type($keys) `,` type($pyramid) `,`
    type($cu_seqlens_q) `,` type($cu_seqlens_k) `->` type($selection)
  }];
  let hasVerifier = 1;  let extraClassDeclaration = [{
    /// The logit scale: the attribute, else 1/sqrt(d).
    float getScaleOrDefault();
  }];
}

def Pisa_SparseAttentionVarlenOp
    : Pisa_Op<"sparse_attention_varlen", [Pure]> {
  let summary = "sparse attention over a packed batch of variable lengths";
  let description = [{
    `pisa.sparse_attention` for each sequence of a packed batch
    (docs/semantics.md, sections 6 and 7): queries `[Tq, Hq, d]`, keys
    `[Tk, Hkv, d]` and values `[Tk, Hkv, dv]` token-major, sequence b's rows
    given by `cu_seqlens_q` and `cu_seqlens_k`; its Nq_b queries are its
    last positions (offset N_b - Nq_b); `selection` `[Tq, Hkv, K]` lists
    leaf blocks of each row's own sequence (as `pisa.hier_topk_varlen`
    writes it). Results: output `[Tq, Hq, dv]` and lse `[Tq, Hq]`.

    ```mlir
    %o, %lse = pisa.sparse_attention_varlen %q, %k, %v, %sel
        cu_seqlens(%cuq, %cuk) block_size = 64
        : tensor<?x8x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf16>,
          tensor<?x2x8xi32>, tensor<?xi32>, tensor<?xi32>
        -> tensor<?x8x64xf16>, tensor<?x8xf32>
    ```
  }];
  let arguments = (ins Pisa_FloatTensor3D:$queries, Pisa_FloatTensor3D:$keys,
                       Pisa_FloatTensor3D:$values,
                       3DTensorOf<[I32]>:$selection,
                       1DTensorOf<[I32]>:$cu_seqlens_q,
                       1DTensorOf<[I32]>:$cu_seqlens_k,
                       I64Attr:$block_size, OptionalAttr<F32Attr>:$scale);
  let results = (outs Pisa_FloatTensor3D:$output, 2DTensorOf<[F32]>:$lse);
  let assemblyFormat = [{
    $queries `,` $keys `,` $values `,` $selection
    `cu_seqlens` `(` $cu_seqlens_q `,` $cu_seqlens_k `)`
    `block_size` `=` $block_size (`scale` `=` $scale^)? attr-dict
    `:` type($queries) `,` type($keys) `,` type($values) `,` type($selection)
    `,` type($cu_seqlens_q) `,` type($cu_seqlens_k)
    `->` type($output) `,` type($lse)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The logit scale: the attribute, else 1/sqrt(d).
    float getScaleOrDefault();
  }];
}

def Pisa_SparseAttentionGradVarlenOp
    : Pisa_Op<"sparse_attention_grad_varlen", [Pure]> {
  let summary = "the backward of sparse attention over a packed batch";
  let description = [{
    `pisa.sparse_attention_grad` for each sequence of a packed batch
    (docs/semantics.md, sections 6.1 and 7), in the layouts of
    `pisa.sparse_attention_varlen`: given its operands, its output and lse
    and grad_output `[Tq, Hq, dv]`, returns the gradients with respect to
    the queries `[Tq, Hq, d]`, keys `[Tk, Hkv, d]` and values
    `[Tk, Hkv, dv]` (element type f32 or that of the queries). A key row
    of no sequence's attended blocks gets zero gradients.

    ```mlir
    %dq, %dk, %dv = pisa.sparse_attention_grad_varlen %q, %k, %v, %sel
        cu_seqlens(%cuq, %cuk) out(%o, %lse) grad(%do) block_size = 64
        : tensor<?x8x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf16>,
          tensor<?x2x8xi32>, tensor<?xi32>, tensor<?xi32>,
          tensor<?x8x64xf16>, tensor<?x8xf32>, tensor<?x8x64xf16>
        -> tensor<?x8x64xf32>, tensor<?x2x64xf32>, tensor<?x2x64xf32>
    ```
  }];
  let arguments = (ins Pisa_FloatTensor3D:$queries, Pisa_FloatTensor3D:$keys,
                       Pisa_FloatTensor3D:$values,
                       3DTensorOf<[I32]>:$selection,
                       1DTensorOf<[I32]>:$cu_seqlens_q,
                       1DTensorOf<[I32]>:$cu_seqlens_k,
                       Pisa_FloatTensor3D:$output, 2DTensorOf<[F32]>:$lse,
                       Pisa_FloatTensor3D:$grad_output,
                       I64Attr:$block_size, OptionalAttr<F32Attr>:$scale);
  let results = (outs Pisa_FloatTensor3D:$grad_queries,
                      Pisa_FloatTensor3D:$grad_keys,
                      Pisa_FloatTensor3D:$grad_values);
  let assemblyFormat = [{
    $queries `,` $keys `,` $values `,` $selection
    `cu_seqlens` `(` $cu_seqlens_q `,` $cu_seqlens_k `)`
    `out` `(` $output `,` $lse `)` `grad` `(` $grad_output `)`
    `block_size` `=` $block_size (`scale` `=` $scale^)? attr-dict
    `:` type($queries) `,` type($keys) `,` type($values) `,` type($selection)
    `,` type($cu_seqlens_q) `,` type($cu_seqlens_k) `,` type($output)
    `,` type($lse) `,` type($grad_output)
    `->` type($grad_queries) `,` type($grad_keys) `,` type($grad_values)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The logit scale: the attribute, else 1/sqrt(d).
    float getScaleOrDefault();
  }];
}

include "pisa/IR/PisaKernelOps.td"

#endif // PISA_IR_PISAOPS_TD
