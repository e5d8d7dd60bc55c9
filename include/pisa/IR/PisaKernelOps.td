//===- PisaKernelOps.td - Kernel-level PISA ops ------------*- tablegen -*-===//
//
// The GPU lowering's middle level: one op per kernel (or per fixed group of
// kernels) of a schedule, destination-passing on tensors or buffers, as
// --pisa-decompose-to-kernels writes them. One-shot bufferization turns the
// tensor form into the buffer form, which --convert-pisa-to-gpu lowers to
// gpu.func kernels and launches. Every operand but the two head counts is
// [B, Hkv, ...]; B, N, Nq and the pyramid's rows may be dynamic. With
// `token_major`, the queries, keys and selection an op reads or writes are
// [B, T, H, X] (docs/semantics.md, "Layouts"); the lowering reads them
// through transposed views, without copies. The `*_varlen` ops take the
// packed operands of docs/semantics.md section 7 ([T, H, X] and
// cu_seqlens) instead. The two-stage ops given `cu_seqlens(q, k)` run on a
// packed batch as a batch of one (B = 1, token-major views of the packed
// queries, keys and selection, an f32 pyramid the packed [1, R, Hkv, d]):
// each query row finds its sequence, contenders stay local to it and the
// leaf arrays number leaves over the batch (docs/gpu.md, "Varlen").
//
//===----------------------------------------------------------------------===//

#ifndef PISA_IR_PISAKERNELOPS_TD
#define PISA_IR_PISAKERNELOPS_TD

include "pisa/IR/PisaDialect.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

/// A ranked tensor or a memref of `rank` with elements of `types`.
class Pisa_ShapedOf<list<Type> types, int rank>
    : AnyTypeOf<[TensorRankOf<types, [rank]>, MemRefRankOf<types, [rank]>]>;

def Pisa_Keys4D : Pisa_ShapedOf<[F32, F16, BF16], 4>;
def Pisa_F32_4D : Pisa_ShapedOf<[F32], 4>;
def Pisa_WalkPyramid : Pisa_ShapedOf<[F32, BF16], 4>;
def Pisa_I32_1D : Pisa_ShapedOf<[I32], 1>;
def Pisa_I32_2D : Pisa_ShapedOf<[I32], 2>;
def Pisa_I32_3D : Pisa_ShapedOf<[I32], 3>;
def Pisa_I32_4D : Pisa_ShapedOf<[I32], 4>;

/// A kernel-level op: its last `numInits` operands are the destinations
/// (written, never read), tied in order to the results in tensor form; in
/// buffer form it has no results and writes its destination buffers.
class Pisa_KernelOp<string mnemonic, int numInits, list<Trait> traits = []>
    : Pisa_Op<"kernel." # mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
        DestinationStyleOpInterface])> {
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let hasVerifier = 1;
  code kernelClassDeclaration = [{
    static constexpr unsigned kNumInits = }] # numInits # [{;
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      unsigned n = getOperation()->getNumOperands();
      return ::mlir::MutableOperandRange(getOperation(), n - kNumInits,
                                         kNumInits);
    }
  }];
  let extraClassDeclaration = kernelClassDeclaration;
}

def Pisa_PyramidKernelOp : Pisa_KernelOp<"pyramid", 1> {
  let summary = "the pyramid of the keys into a destination (two kernels)";
  let description = [{
    Writes `pisa.pyramid_build` of `keys` into `pyramid`: a leaf kernel
    (one block per leaf, one thread per feature), then one launch of the
    level kernel per upper level.

    ```mlir
    %p = pisa.kernel.pyramid %k outs(%init) block_size = 64 branching = 2
        : tensor<1x2x200x64xf16>, tensor<1x2x7x64xf32> -> tensor<1x2x7x64xf32>
    ```
  }];
  let arguments = (ins Pisa_Keys4D:$keys, Pisa_F32_4D:$pyramid,
                       I64Attr:$block_size, I64Attr:$branching,
                       UnitAttr:$token_major);
  let assemblyFormat = [{
    $keys `outs` `(` $pyramid `)` `block_size` `=` $block_size
    `branching` `=` $branching attr-dict `:` type($keys) `,` type($pyramid)
    (`->` type($results)^)?
  }];
}

def Pisa_FragmentPlanesKernelOp : Pisa_KernelOp<"fragment_planes", 1> {
  let summary = "the pyramid as bf16 hi/lo planes for the tensor-core walk";
  let description = [{
    Writes each f32 pyramid row as 2 d bf16 values, `[B, Hkv, P, 2 d]`
    (with `token_major` the pyramid is `[B, P, Hkv, d]`, a packed varlen
    pyramid seen as a batch of one; the planes stay head-major):
    per k-step of 16 features, the high halves (rounded values) in the
    order mma.sync's B fragment reads them, then the low halves (the
    rounded remainders), so that one 16-byte load gives a lane both.

    ```mlir
    %planes = pisa.kernel.fragment_planes %p outs(%init)
        : tensor<1x1x127x128xf32>, tensor<1x1x127x256xbf16>
        -> tensor<1x1x127x256xbf16>
    ```
  }];
  let arguments = (ins Pisa_F32_4D:$pyramid,
                       Pisa_ShapedOf<[BF16], 4>:$planes,
                       UnitAttr:$token_major);
  let assemblyFormat = [{
    $pyramid `outs` `(` $planes `)` attr-dict `:` type($pyramid) `,`
    type($planes) (`->` type($results)^)?
  }];
}

def Pisa_WalkKernelOp : Pisa_KernelOp<"walk", 2, [AttrSizedOperandSegments]> {
  let summary = "stage 1: walk levels L..2 down to each query's leaf contenders";
  let description = [{
    One warp per (query, KV head) walks `pisa.hier_topk`'s levels L..2
    (semantics.md section 3, step 2) and writes the leaf contenders (at
    most g * K, `contenders[b, kv, i, :]`) and their number (`counts`).
    `num_keys` is N; a constant N unrolls the levels. With `tensor_cores`
    the levels score on mma.sync from `pyramid` given as fragment planes
    (`pisa.kernel.fragment_planes`), else on f32 rows.

    ```mlir
    %c, %n = pisa.kernel.walk %q, %p, %off, %nk outs(%c0, %n0) topk = 8
        block_size = 64 branching = 2 scale = 0.0883883461 {tensor_cores}
        : tensor<1x16x4096x128xbf16>, tensor<1x1x127x256xbf16>,
          tensor<1x1x4096x16xi32>, tensor<1x1x4096xi32>
        -> tensor<1x1x4096x16xi32>, tensor<1x1x4096xi32>
    ```
  }];
  let arguments = (ins Pisa_Keys4D:$queries, Pisa_WalkPyramid:$pyramid,
                       Index:$query_offset, Index:$num_keys,
                       Optional<Pisa_I32_1D>:$cu_seqlens_q,
                       Optional<Pisa_I32_1D>:$cu_seqlens_k,
                       Pisa_I32_4D:$contenders, Pisa_I32_3D:$counts,
                       I64Attr:$topk, I64Attr:$block_size, I64Attr:$branching,
                       F32Attr:$scale, UnitAttr:$tensor_cores,
                       UnitAttr:$token_major);
  let assemblyFormat = [{
    $queries `,` $pyramid `,` $query_offset `,` $num_keys
    (`cu_seqlens` `(` $cu_seqlens_q^ `,` $cu_seqlens_k `:`
     type($cu_seqlens_q) `,` type($cu_seqlens_k) `)`)?
    `outs` `(` $contenders `,` $counts `)` `topk` `=` $topk
    `block_size` `=` $block_size `branching` `=` $branching
    `scale` `=` $scale attr-dict `:` type($queries) `,` type($pyramid) `,`
    type($contenders) `,` type($counts) (`->` type($results)^)?
  }];
}

def Pisa_BucketKernelOp : Pisa_KernelOp<"bucket", 8, [AttrSizedOperandSegments]> {
  let summary = "stage 2a: group the pairs to score by leaf, cut into tiles";
  let description = [{
    A counting sort of the (query, contender) pairs that must be scored
    (those a query cannot keep unscored) by leaf: a histogram
    (`leaf_count`), a scan giving each leaf's first pair (`leaf_start`),
    its first tile (`tile_base`) and the number of tiles (`num_tiles`,
    groups cut into tiles of at most `q_tile` queries), and a scatter of
    the pairs (`sorted_pairs`, query * g*K + slot) with each tile's leaf
    and first pair (`tile_leaf`, `tile_first`). `cursor` is scratch.
    Three kernels; the histogram is zeroed first.

    ```mlir
    %r:8 = pisa.kernel.bucket %off, %c, %n outs(%lc, %ls, %cur, %tl, %tf,
        %nt, %sp, %tb) topk = 8 block_size = 64 q_tile = 4
        : tensor<1x1x4096x16xi32>, tensor<1x1x4096xi32>, tensor<1x1x64xi32>,
          tensor<1x1x64xi32>, tensor<1x1x64xi32>, tensor<1x1x16448xi32>,
          tensor<1x1x16448xi32>, tensor<1x1xi32>, tensor<1x1x65536xi32>,
          tensor<1x1x64xi32> -> ...
    ```
  }];
  let arguments = (ins Index:$query_offset, Pisa_I32_4D:$contenders,
                       Pisa_I32_3D:$counts,
                       Optional<Pisa_I32_1D>:$cu_seqlens_q,
                       Optional<Pisa_I32_1D>:$cu_seqlens_k,
                       Pisa_I32_3D:$leaf_count,
                       Pisa_I32_3D:$leaf_start, Pisa_I32_3D:$cursor,
                       Pisa_I32_3D:$tile_leaf, Pisa_I32_3D:$tile_first,
                       Pisa_I32_2D:$num_tiles, Pisa_I32_3D:$sorted_pairs,
                       Pisa_I32_3D:$tile_base, I64Attr:$topk,
                       I64Attr:$block_size, I64Attr:$q_tile);
  let assemblyFormat = [{
    $query_offset `,` $contenders `,` $counts
    (`cu_seqlens` `(` $cu_seqlens_q^ `,` $cu_seqlens_k `:`
     type($cu_seqlens_q) `,` type($cu_seqlens_k) `)`)?
    `outs` `(` $leaf_count `,`
    $leaf_start `,` $cursor `,` $tile_leaf `,` $tile_first `,` $num_tiles
    `,` $sorted_pairs `,` $tile_base `)` `topk` `=` $topk
    `block_size` `=` $block_size `q_tile` `=` $q_tile attr-dict
    `:` type($contenders) `,` type($counts) `,` type($leaf_count) `,`
    type($leaf_start) `,` type($cursor) `,` type($tile_leaf) `,`
    type($tile_first) `,` type($num_tiles) `,` type($sorted_pairs) `,`
    type($tile_base) (`->` type($results)^)?
  }];
}

def Pisa_ScoreTilesKernelOp : Pisa_KernelOp<"score_tiles", 1, [AttrSizedOperandSegments]> {
  let summary = "stage 2b: score every tile's queries against its leaf's keys";
  let description = [{
    One block per tile (of `pisa.kernel.bucket`) stages the leaf's C keys
    once and writes the group score u of each of the tile's pairs to
    `scores[b, kv, query, slot]` (other entries are left as they are). On
    tensor cores (mma.sync) for f16 and bf16 when the shapes allow
    (docs/gpu.md), else SIMT.

    ```mlir
    %u = pisa.kernel.score_tiles %q, %k, %off, %lc, %ls, %tl, %tf, %nt, %sp
        outs(%u0) block_size = 64 q_tile = 4 scale = 0.0883883461
        : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>, ...
        -> tensor<1x1x4096x16xf32>
    ```
  }];
  let arguments = (ins Pisa_Keys4D:$queries, Pisa_Keys4D:$keys,
                       Index:$query_offset, Pisa_I32_3D:$leaf_count,
                       Pisa_I32_3D:$leaf_start, Pisa_I32_3D:$tile_leaf,
                       Pisa_I32_3D:$tile_first, Pisa_I32_2D:$num_tiles,
                       Pisa_I32_3D:$sorted_pairs,
                       Optional<Pisa_I32_1D>:$cu_seqlens_q,
                       Optional<Pisa_I32_1D>:$cu_seqlens_k,
                       Pisa_F32_4D:$scores,
                       I64Attr:$topk, I64Attr:$block_size, I64Attr:$q_tile,
                       F32Attr:$scale, UnitAttr:$token_major);
  let assemblyFormat = [{
    $queries `,` $keys `,` $query_offset `,` $leaf_count `,` $leaf_start `,`
    $tile_leaf `,` $tile_first `,` $num_tiles `,` $sorted_pairs
    (`cu_seqlens` `(` $cu_seqlens_q^ `,` $cu_seqlens_k `:`
     type($cu_seqlens_q) `,` type($cu_seqlens_k) `)`)?
    `outs` `(` $scores `)` `topk` `=` $topk `block_size` `=` $block_size
    `q_tile` `=` $q_tile `scale` `=` $scale attr-dict
    `:` type($queries) `,` type($keys) `,` type($leaf_count) `,`
    type($leaf_start) `,` type($tile_leaf) `,` type($tile_first) `,`
    type($num_tiles) `,` type($sorted_pairs) `,` type($scores)
    (`->` type($results)^)?
  }];
}

def Pisa_SelectFinalKernelOp : Pisa_KernelOp<"select_final", 1, [AttrSizedOperandSegments]> {
  let summary = "stage 3: the forced blocks and the best scored contenders";
  let description = [{
    One thread per (query, KV head) applies step 3 of semantics.md
    section 3 to its contenders (scored by `pisa.kernel.score_tiles` when
    they compete) and writes the selection, ascending, -1 padded.

    ```mlir
    %sel = pisa.kernel.select_final %off, %nk, %c, %n, %u outs(%s0)
        topk = 8 block_size = 64 : tensor<1x1x4096x16xi32>,
        tensor<1x1x4096xi32>, tensor<1x1x4096x16xf32>, tensor<1x1x4096x8xi32>
        -> tensor<1x1x4096x8xi32>
    ```
  }];
  let arguments = (ins Index:$query_offset, Index:$num_keys,
                       Pisa_I32_4D:$contenders, Pisa_I32_3D:$counts,
                       Pisa_F32_4D:$scores,
                       Optional<Pisa_I32_1D>:$cu_seqlens_q,
                       Optional<Pisa_I32_1D>:$cu_seqlens_k,
                       Pisa_I32_4D:$selection,
                       I64Attr:$topk, I64Attr:$block_size,
                       UnitAttr:$token_major);
  let assemblyFormat = [{
    $query_offset `,` $num_keys `,` $contenders `,` $counts `,` $scores
    (`cu_seqlens` `(` $cu_seqlens_q^ `,` $cu_seqlens_k `:`
     type($cu_seqlens_q) `,` type($cu_seqlens_k) `)`)?
    `outs` `(` $selection `)` `topk` `=` $topk `block_size` `=` $block_size
    attr-dict `:` type($contenders) `,` type($counts) `,` type($scores) `,`
    type($selection) (`->` type($results)^)?
  }];
}

def Pisa_PyramidAppendKernelOp : Pisa_KernelOp<"pyramid_append", 1> {
  let summary = "appended keys into a pyramid cache, in place (one kernel)";
  let description = [{
    `pisa.pyramid_append` in destination-passing form: `pyramid` is the
    cache (the capacity layout of docs/semantics.md section 4, Ncap the
    keys' dimension 2), read and updated in place; unlike the other
    kernel-level ops this one reads its destination (the children of the
    nodes it recomputes). One block per (batch, KV head) recomputes the
    leaves from from[b] / C to M_1(to[b]) - 1 and their ancestors, level
    by level with a barrier between levels, in the contract's summation
    order; a sequence whose from/to break the rules is left unchanged.
    With `block_table` (`[B, Mp]`) the keys are a page pool `[P, S, Hkv,
    d]` (key j of sequence b at page block_table[b, j / S], slot j % S;
    Ncap = Mp * S), and a sequence with a page below to[b] outside [0, P)
    is left unchanged.

    ```mlir
    %p1 = pisa.kernel.pyramid_append %k, %from, %to outs(%p0) block_size = 64
        branching = 2 : tensor<1x1x4096x128xbf16>, tensor<1xi32>,
        tensor<1xi32>, tensor<1x1x127x128xf32> -> tensor<1x1x127x128xf32>
    ```
  }];
  let arguments = (ins Pisa_Keys4D:$keys, Pisa_I32_1D:$from, Pisa_I32_1D:$to,
                       Optional<Pisa_I32_2D>:$block_table,
                       Pisa_F32_4D:$pyramid, I64Attr:$block_size,
                       I64Attr:$branching);
  let assemblyFormat = [{
    $keys `,` $from `,` $to
    (`block_table` `(` $block_table^ `:` type($block_table) `)`)?
    `outs` `(` $pyramid `)` `block_size` `=`
    $block_size `branching` `=` $branching attr-dict `:` type($keys) `,`
    type($from) `,` type($to) `,` type($pyramid) (`->` type($results)^)?
  }];
}

def Pisa_SelectSingleStageKernelOp : Pisa_KernelOp<"select_single_stage", 1> {
  let summary = "the whole selection, one warp per (query, KV head)";
  let description = [{
    The single-stage schedule: one kernel walks the levels, scores the leaf
    contenders from the raw keys when they compete and writes the
    selection. With `capacity`, the pyramid is a cache in that capacity's
    layout (`pisa.hier_topk ... capacity`, docs/semantics.md section 4).

    ```mlir
    %sel = pisa.kernel.select_single_stage %q, %k, %p, %off outs(%s0)
        topk = 8 block_size = 64 branching = 2 scale = 0.0883883461
        : tensor<1x16x1x128xbf16>, tensor<1x1x4096x128xbf16>,
          tensor<1x1x127x128xf32>, tensor<1x1x1x8xi32>
        -> tensor<1x1x1x8xi32>
    ```
  }];
  let arguments = (ins Pisa_Keys4D:$queries, Pisa_Keys4D:$keys,
                       Pisa_F32_4D:$pyramid, Index:$query_offset,
                       Pisa_I32_4D:$selection, I64Attr:$topk,
                       I64Attr:$block_size, I64Attr:$branching,
                       F32Attr:$scale, UnitAttr:$token_major,
                       OptionalAttr<I64Attr>:$capacity);
  let assemblyFormat = [{
    $queries `,` $keys `,` $pyramid `,` $query_offset `outs` `(` $selection
    `)` `topk` `=` $topk `block_size` `=` $block_size
    `branching` `=` $branching `scale` `=` $scale
    (`capacity` `=` $capacity^)? attr-dict
    `:` type($queries) `,` type($keys) `,` type($pyramid) `,`
    type($selection) (`->` type($results)^)?
  }];
}

def Pisa_AppendSelectSingleStageKernelOp
    : Pisa_KernelOp<"append_select_single_stage", 1> {
  let summary = "a decode step in one kernel: the append, then the selection";
  let description = [{
    `pisa.kernel.pyramid_append` followed by a decode step's
    `pisa.kernel.select_single_stage` over the cache it updates, fused by
    `--pisa-fuse-decode-append` (buffer form only): each block owns one
    (batch, KV head), first brings the cache `pyramid` from from[b] to
    to[b] keys of `append_keys` (as pisa.kernel.pyramid_append does), then
    a barrier, then selects for its query (as
    pisa.kernel.select_single_stage with `capacity` does). One launch
    instead of two. The cache is read and written; the selection written.

    ```mlir
    pisa.kernel.append_select_single_stage %q, %k, %p, %off, %kc, %from, %to
        outs(%s) topk = 8 block_size = 64 branching = 2
        scale = 0.0883883461 capacity = 8192
        : memref<1x16x1x128xbf16>, memref<1x1x?x128xbf16>,
          memref<1x1x255x128xf32>, memref<1x1x8192x128xbf16>,
          memref<1xi32>, memref<1xi32>, memref<1x1x1x8xi32>
    ```
  }];
  let arguments = (ins Pisa_Keys4D:$queries, Pisa_Keys4D:$keys,
                       Pisa_F32_4D:$pyramid, Index:$query_offset,
                       Pisa_Keys4D:$append_keys, Pisa_I32_1D:$append_from,
                       Pisa_I32_1D:$append_to, Pisa_I32_4D:$selection,
                       I64Attr:$topk, I64Attr:$block_size,
                       I64Attr:$branching, F32Attr:$scale, I64Attr:$capacity);
  let assemblyFormat = [{
    $queries `,` $keys `,` $pyramid `,` $query_offset `,` $append_keys `,`
    $append_from `,` $append_to `outs` `(` $selection `)` `topk` `=` $topk
    `block_size` `=` $block_size `branching` `=` $branching `scale` `=`
    $scale `capacity` `=` $capacity attr-dict
    `:` type($queries) `,` type($keys) `,` type($pyramid) `,`
    type($append_keys) `,` type($append_from) `,` type($append_to) `,`
    type($selection) (`->` type($results)^)?
  }];
}

def Pisa_SelectDecodeKernelOp : Pisa_KernelOp<"select_decode", 1> {
  let summary = "batched decode selection over caches, one warp per query";
  let description = [{
    `pisa.decode_select` in destination-passing form: the single-stage
    kernel, one warp per (query, KV head), each reading its sequence's
    length from `seq_lens` on the device (a length outside [Nq, Ncap]
    gives K entries of -2) and walking the cache's capacity layout (Ncap,
    the keys' dimension 2). With `block_table` (`[B, Mp]`) the keys are a
    page pool `[P, S, Hkv, d]` (Ncap = Mp * S) read through the table; a
    sequence with a page below its length outside [0, P) gets -2 rows.

    ```mlir
    %sel = pisa.kernel.select_decode %q, %kc, %pc, %n outs(%s0) topk = 8
        block_size = 64 branching = 2 scale = 0.0883883461
        : tensor<64x16x1x128xbf16>, tensor<64x1x32768x128xbf16>,
          tensor<64x1x1023x128xf32>, tensor<64xi32>, tensor<64x1x1x8xi32>
        -> tensor<64x1x1x8xi32>
    ```
  }];
  let arguments = (ins Pisa_Keys4D:$queries, Pisa_Keys4D:$keys,
                       Pisa_F32_4D:$pyramid, Pisa_I32_1D:$seq_lens,
                       Optional<Pisa_I32_2D>:$block_table,
                       Pisa_I32_4D:$selection, I64Attr:$topk,
                       I64Attr:$block_size, I64Attr:$branching, F32Attr:$scale);
  let assemblyFormat = [{
    $queries `,` $keys `,` $pyramid `,` $seq_lens
    (`block_table` `(` $block_table^ `:` type($block_table) `)`)?
    `outs` `(` $selection `)`
    `topk` `=` $topk `block_size` `=` $block_size `branching` `=` $branching
    `scale` `=` $scale attr-dict `:` type($queries) `,` type($keys) `,`
    type($pyramid) `,` type($seq_lens) `,` type($selection)
    (`->` type($results)^)?
  }];
}

def Pisa_F32_3D : Pisa_ShapedOf<[F32], 3>;
def Pisa_Keys3D : Pisa_ShapedOf<[F32, F16, BF16], 3>;

def Pisa_PyramidVarlenKernelOp : Pisa_KernelOp<"pyramid_varlen", 1> {
  let summary = "the pyramids of a packed varlen batch (two kernels)";
  let description = [{
    Writes `pisa.pyramid_build_varlen` of `keys` (`[Tk, Hkv, d]`, sequences
    by `cu_seqlens`) into `pyramid` (`[R, Hkv, d]`, sequence b at row
    R_b, docs/semantics.md section 7). Blocks are numbered over the whole
    batch and each finds its sequence on the device, so nothing is read
    back to the host: a leaf kernel, then one level kernel per level of
    the longest possible sequence (N = Tk).

    ```mlir
    %p = pisa.kernel.pyramid_varlen %k, %cu outs(%init) block_size = 64
        branching = 2 : tensor<?x2x64xf16>, tensor<?xi32>, tensor<?x2x64xf32>
        -> tensor<?x2x64xf32>
    ```
  }];
  let arguments = (ins Pisa_Keys3D:$keys, Pisa_I32_1D:$cu_seqlens,
                       Pisa_F32_3D:$pyramid, I64Attr:$block_size,
                       I64Attr:$branching);
  let assemblyFormat = [{
    $keys `,` $cu_seqlens `outs` `(` $pyramid `)` `block_size` `=`
    $block_size `branching` `=` $branching attr-dict `:` type($keys) `,`
    type($cu_seqlens) `,` type($pyramid) (`->` type($results)^)?
  }];
}

def Pisa_SelectSingleStageVarlenKernelOp
    : Pisa_KernelOp<"select_single_stage_varlen", 1> {
  let summary = "the whole varlen selection, one warp per (query row, KV head)";
  let description = [{
    `pisa.hier_topk_varlen` in the single-stage schedule: one warp per
    packed query row and KV head finds its sequence (a binary search of
    `cu_seqlens_q`), takes N_b, its position N_b - Nq_b + i and the
    sequence's pyramid rows from the two cu_seqlens, and runs the
    selection of `pisa.kernel.select_single_stage` on that sequence.

    ```mlir
    %sel = pisa.kernel.select_single_stage_varlen %q, %k, %p, %cuq, %cuk
        outs(%s0) topk = 8 block_size = 64 branching = 2
        scale = 0.0883883461 : tensor<?x16x128xbf16>, tensor<?x1x128xbf16>,
        tensor<?x1x128xf32>, tensor<?xi32>, tensor<?xi32>,
        tensor<?x1x8xi32> -> tensor<?x1x8xi32>
    ```
  }];
  let arguments = (ins Pisa_Keys3D:$queries, Pisa_Keys3D:$keys,
                       Pisa_F32_3D:$pyramid, Pisa_I32_1D:$cu_seqlens_q,
                       Pisa_I32_1D:$cu_seqlens_k, Pisa_I32_3D:$selection,
                       I64Attr:$topk, I64Attr:$block_size,
                       I64Attr:$branching, F32Attr:$scale);
  let assemblyFormat = [{
    $queries `,` $keys `,` $pyramid `,` $cu_seqlens_q `,` $cu_seqlens_k
    `outs` `(` $selection `)` `topk` `=` $topk `block_size` `=` $block_size
    `branching` `=` $branching `scale` `=` $scale attr-dict
    `:` type($queries) `,` type($keys) `,` type($pyramid) `,`
    type($cu_seqlens_q) `,` type($cu_seqlens_k) `,` type($selection)
    (`->` type($results)^)?
  }];
}

def Pisa_SparseAttentionKernelOp
    : Pisa_KernelOp<"sparse_attention", 2, [AttrSizedOperandSegments]> {
  let summary = "attention over the selected blocks, one block per query";
  let description = [{
    `pisa.sparse_attention` in destination-passing form: one block per
    (query, batch x KV head) stages the G head rows of its query once and,
    per selection entry used, the block's keys and values, and runs both
    products on tensor cores with an online softmax (docs/gpu.md, "Sparse
    attention"). Writes `output` [B, Hq, Nq, dv] and `lse` [B, Hq, Nq]
    (with `token_major`: every operand token-major, lse [B, Nq, Hq]; the
    lowering reads and writes them through transposed views). Given
    `cu_seqlens(q, k)` it is `pisa.sparse_attention_varlen`: every operand
    a packed batch seen as a batch of one, token-major; each query row
    finds its sequence, whose keys and position (N_b - Nq_b + its index)
    replace `query_offset` and the batch's (docs/gpu.md, "Varlen").

    ```mlir
    %o, %l = pisa.kernel.sparse_attention %q, %k, %v, %sel, %off
        outs(%o0, %l0) block_size = 64 scale = 0.0883883461
        : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>,
          tensor<1x1x4096x128xbf16>, tensor<1x1x4096x8xi32>,
          tensor<1x16x4096x128xbf16>, tensor<1x16x4096xf32>
        -> tensor<1x16x4096x128xbf16>, tensor<1x16x4096xf32>
    ```
  }];
  let arguments = (ins Pisa_Keys4D:$queries, Pisa_Keys4D:$keys,
                       Pisa_Keys4D:$values, Pisa_I32_4D:$selection,
                       Index:$query_offset,
                       Optional<Pisa_I32_1D>:$cu_seqlens_q,
                       Optional<Pisa_I32_1D>:$cu_seqlens_k,
                       Pisa_Keys4D:$output,
                       Pisa_F32_3D:$lse, I64Attr:$block_size,
                       F32Attr:$scale, UnitAttr:$token_major);
  let assemblyFormat = [{
    $queries `,` $keys `,` $values `,` $selection `,` $query_offset
    (`cu_seqlens` `(` $cu_seqlens_q^ `,` $cu_seqlens_k `:`
     type($cu_seqlens_q) `,` type($cu_seqlens_k) `)`)?
    `outs` `(` $output `,` $lse `)` `block_size` `=` $block_size
    `scale` `=` $scale attr-dict `:` type($queries) `,` type($keys) `,`
    type($values) `,` type($selection) `,` type($output) `,` type($lse)
    (`->` type($results)^)?
  }];
}

def Pisa_SparseAttentionGradQueriesKernelOp
    : Pisa_KernelOp<"sparse_attention_grad_queries", 2, [AttrSizedOperandSegments]> {
  let summary = "dq and D of sparse attention's backward, one block per query";
  let description = [{
    The query half of `pisa.sparse_attention_grad`: one block per (query,
    batch x KV head) stages the G head rows of q and dO once, computes
    D = dO . o per head row (written to `delta` [B, Hq, Nq], head-major in
    every layout) and, per attended block (the forward's rule), recomputes
    P from lse and accumulates dq = scale sum_j dS_j k_j on tensor cores
    (docs/gpu.md, "Sparse attention backward"). `grad_queries` has the
    queries' shape, f32 or their element type. With `token_major`, the
    operands the forward's kernel reads token-major, and dq, are. Given
    `cu_seqlens(q, k)`, a packed batch as `pisa.kernel.sparse_attention`
    takes it.

    ```mlir
    %dq, %dd = pisa.kernel.sparse_attention_grad_queries %q, %k, %v, %sel,
        %off, %o, %lse, %do outs(%dq0, %dd0) block_size = 64
        scale = 0.0883883461
        : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>,
          tensor<1x1x4096x128xbf16>, tensor<1x1x4096x8xi32>,
          tensor<1x16x4096x128xbf16>, tensor<1x16x4096xf32>,
          tensor<1x16x4096x128xbf16>, tensor<1x16x4096x128xf32>,
          tensor<1x16x4096xf32>
        -> tensor<1x16x4096x128xf32>, tensor<1x16x4096xf32>
    ```
  }];
  let arguments = (ins Pisa_Keys4D:$queries, Pisa_Keys4D:$keys,
                       Pisa_Keys4D:$values, Pisa_I32_4D:$selection,
                       Index:$query_offset, Pisa_Keys4D:$output,
                       Pisa_F32_3D:$lse, Pisa_Keys4D:$grad_output,
                       Optional<Pisa_I32_1D>:$cu_seqlens_q,
                       Optional<Pisa_I32_1D>:$cu_seqlens_k,
                       Pisa_Keys4D:$grad_queries, Pisa_F32_3D:$delta,
                       I64Attr:$block_size, F32Attr:$scale,
                       UnitAttr:$token_major);
  let assemblyFormat = [{
    $queries `,` $keys `,` $values `,` $selection `,` $query_offset `,`
    $output `,` $lse `,` $grad_output
    (`cu_seqlens` `(` $cu_seqlens_q^ `,` $cu_seqlens_k `:`
     type($cu_seqlens_q) `,` type($cu_seqlens_k) `)`)?
    `outs` `(` $grad_queries `,` $delta `)` `block_size` `=` $block_size
    `scale` `=` $scale attr-dict `:` type($queries) `,` type($keys) `,`
    type($values) `,` type($selection) `,` type($output) `,` type($lse) `,`
    type($grad_output) `,` type($grad_queries) `,` type($delta)
    (`->` type($results)^)?
  }];
}

def Pisa_SparseAttentionGradKeysKernelOp
    : Pisa_KernelOp<"sparse_attention_grad_keys", 5, [AttrSizedOperandSegments]> {
  let summary = "dk and dv of sparse attention's backward, one block per key block";
  let description = [{
    The key half of `pisa.sparse_attention_grad`: lists which queries
    attend each key block (scratch, linear in N and Nq): `query_index`
    ([B, Hkv, ceil(N / C), Q + 3] i32, Q = min(256, ceil(Nq / 32)) chunks
    of ceil(Nq / Q) queries) holds, per key block, each chunk's count of
    attending queries then its offset in the block's list, the list's
    length, its start and the count of the block's finished segments;
    `query_list` ([B, Hkv, Nq, K] i32) holds the lists, block after block,
    each in chunk order and, inside a chunk, in a fixed order (by
    32-query steps, selection entries, lanes). Then one block per (key
    block, segment of its list, batch x KV head) stages the block's keys
    and values once and, for its segment's queries, several at a time,
    recomputes P and dS from lse and `delta` (D of
    `pisa.kernel.sparse_attention_grad_queries`) and accumulates dk = scale
    sum dS q and dv = sum P dO on tensor cores. The segments of a block add
    their sums in segment order through `accumulators` ([B, Hkv, N, d + dv]
    f32 scratch), so the result does not depend on scheduling. A block no
    query attends gets zeros. `grad_keys` and `grad_values` have the keys'
    and values' shapes, f32 or their element type. Given `cu_seqlens(q,
    k)`, a packed batch seen as a token-major batch of one: the rows of
    `query_index` are the batch's block slots (sequence s's blocks from
    floor(cu_k[s] / C) + s: floor(Tk / C) + B rows), whose lists hold only
    their sequence's queries.

    ```mlir
    %dk, %dv, %idx, %list, %acc = pisa.kernel.sparse_attention_grad_keys
        %q, %k, %v, %sel, %off, %lse, %dd, %do
        outs(%dk0, %dv0, %i0, %l0, %a0)
        block_size = 64 scale = 0.0883883461
        : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>,
          tensor<1x1x4096x128xbf16>, tensor<1x1x4096x8xi32>,
          tensor<1x16x4096xf32>, tensor<1x16x4096xf32>,
          tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xf32>,
          tensor<1x1x4096x128xf32>, tensor<1x1x64x131xi32>,
          tensor<1x1x4096x8xi32>, tensor<1x1x4096x256xf32>
        -> tensor<1x1x4096x128xf32>, tensor<1x1x4096x128xf32>,
           tensor<1x1x64x131xi32>, tensor<1x1x4096x8xi32>,
           tensor<1x1x4096x256xf32>
    ```
  }];
  let arguments = (ins Pisa_Keys4D:$queries, Pisa_Keys4D:$keys,
                       Pisa_Keys4D:$values, Pisa_I32_4D:$selection,
                       Index:$query_offset, Pisa_F32_3D:$lse,
                       Pisa_F32_3D:$delta, Pisa_Keys4D:$grad_output,
                       Optional<Pisa_I32_1D>:$cu_seqlens_q,
                       Optional<Pisa_I32_1D>:$cu_seqlens_k,
                       Pisa_Keys4D:$grad_keys, Pisa_Keys4D:$grad_values,
                       Pisa_I32_4D:$query_index, Pisa_I32_4D:$query_list,
                       Pisa_F32_4D:$accumulators,
                       Optional<Pisa_Keys4D>:$scores,
                       I64Attr:$block_size,
                       F32Attr:$scale, UnitAttr:$token_major);
  let assemblyFormat = [{
    $queries `,` $keys `,` $values `,` $selection `,` $query_offset `,`
    $lse `,` $delta `,` $grad_output
    (`cu_seqlens` `(` $cu_seqlens_q^ `,` $cu_seqlens_k `:`
     type($cu_seqlens_q) `,` type($cu_seqlens_k) `)`)?
    `outs` `(` $grad_keys `,` $grad_values `,` $query_index `,`
    $query_list `,` $accumulators (`scores` $scores^)? `)` `block_size` `=` $block_size `scale` `=` $scale
    attr-dict `:` type($queries) `,` type($keys) `,` type($values) `,`
    type($selection) `,` type($lse) `,` type($delta) `,`
    type($grad_output) `,` type($grad_keys) `,` type($grad_values) `,`
    type($query_index) `,` type($query_list) `,` type($accumulators)
    (`,` `scores` type($scores)^)? (`->` type($results)^)?
  }];
  // The inits are the last five operands, six with `scores`.
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      unsigned n = getOperation()->getNumOperands();
      unsigned inits = getScores() ? 6 : 5;
      return ::mlir::MutableOperandRange(getOperation(), n - inits, inits);
    }
  }];
}

def Pisa_SparseAttentionGradDeltaKernelOp
    : Pisa_KernelOp<"sparse_attention_grad_delta", 1> {
  let summary = "D = rowsum(dO o) of sparse attention's backward, a quad of lanes a head row";
  let description = [{
    D of `pisa.sparse_attention_grad` ([B, Hq, Nq] f32, head-major in every
    layout): for each query head row, the dot product of its dO and o rows
    (f32 sums of the 16-bit products). The backward computes it before the
    key half where the dq pass comes after it (`scores` on
    `pisa.kernel.sparse_attention_grad_keys`). With `token_major`, o and dO
    are [B, Nq, Hq, dv].

    ```mlir
    %dd = pisa.kernel.sparse_attention_grad_delta %o, %do outs(%dd0)
        : tensor<1x16x4096x128xbf16>, tensor<1x16x4096x128xbf16>,
          tensor<1x16x4096xf32> -> tensor<1x16x4096xf32>
    ```
  }];
  let arguments = (ins Pisa_Keys4D:$output, Pisa_Keys4D:$grad_output,
                       Pisa_F32_3D:$delta, UnitAttr:$token_major);
  let assemblyFormat = [{
    $output `,` $grad_output `outs` `(` $delta `)` attr-dict `:`
    type($output) `,` type($grad_output) `,` type($delta)
    (`->` type($results)^)?
  }];
}

def Pisa_SparseAttentionGradQueriesFromScoresKernelOp
    : Pisa_KernelOp<"sparse_attention_grad_queries_from_scores", 1> {
  let summary = "dq of sparse attention's backward from the key half's dS tiles";
  let description = [{
    dq = scale sum_j dS_j k_j for each query head row, over the query's
    attended blocks (the forward's rule) in order, where dS_j is tile j of
    its row of `scores` ([B, Hkv, Nq, K G C], the query's attended blocks'
    G x C tiles in the order it attends them, written by
    `pisa.kernel.sparse_attention_grad_keys`): one warp per (query, batch x
    KV head), K's rows copied into the warp's tile, dS's A fragments read
    from `scores`, dq accumulated in f32 on tensor cores. `grad_queries`
    has the queries' shape, f32 or their element type. With
    `token_major`, the queries, keys, selection and dq are token-major.

    ```mlir
    %dq = pisa.kernel.sparse_attention_grad_queries_from_scores %q, %k,
        %sel, %off, %ds outs(%dq0) block_size = 64 scale = 0.0883883461
        : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>,
          tensor<1x1x4096x8xi32>, tensor<1x1x4096x8192xbf16>,
          tensor<1x16x4096x128xf32> -> tensor<1x16x4096x128xf32>
    ```
  }];
  let arguments = (ins Pisa_Keys4D:$queries, Pisa_Keys4D:$keys,
                       Pisa_I32_4D:$selection, Index:$query_offset,
                       Pisa_Keys4D:$scores, Pisa_Keys4D:$grad_queries,
                       I64Attr:$block_size, F32Attr:$scale,
                       UnitAttr:$token_major);
  let assemblyFormat = [{
    $queries `,` $keys `,` $selection `,` $query_offset `,` $scores
    `outs` `(` $grad_queries `)` `block_size` `=` $block_size
    `scale` `=` $scale attr-dict `:` type($queries) `,` type($keys) `,`
    type($selection) `,` type($scores) `,` type($grad_queries)
    (`->` type($results)^)?
  }];
}

def Pisa_LseScoreKernelOp : Pisa_KernelOp<"lse_score", 1> {
  let summary = "group-summed LSE scores of given candidates, a warp per query";
  let description = [{
    `pisa.lse_score` in destination-passing form: one warp per (query,
    batch x KV head) holds the G head rows of its query and, for each entry
    of its candidate row, scores that node of level `level` from its
    children (docs/semantics.md section 2), writing `scores[b, kv, i, s]`.
    `children` are the raw keys [B, Hkv, N, d] at level 1, else that
    level's f32 summaries [B, Hkv, M_{level-1}, d].

    ```mlir
    %u = pisa.kernel.lse_score %q, %k, %cand, %off outs(%u0) level = 1
        block_size = 64 branching = 2 scale = 0.125
        : tensor<1x4x128x64xf16>, tensor<1x1x128x64xf16>,
          tensor<1x1x128x16xi32>, tensor<1x1x128x16xf32>
        -> tensor<1x1x128x16xf32>
    ```
  }];
  let arguments = (ins Pisa_Keys4D:$queries, Pisa_Keys4D:$children,
                       Pisa_I32_4D:$candidates, Index:$query_offset,
                       Pisa_F32_4D:$scores, I64Attr:$level,
                       I64Attr:$block_size, I64Attr:$branching,
                       F32Attr:$scale);
  let assemblyFormat = [{
    $queries `,` $children `,` $candidates `,` $query_offset
    `outs` `(` $scores `)` `level` `=` $level `block_size` `=` $block_size
    `branching` `=` $branching `scale` `=` $scale attr-dict
    `:` type($queries) `,` type($children) `,` type($candidates) `,`
    type($scores) (`->` type($results)^)?
  }];
}

#endif // PISA_IR_PISAKERNELOPS_TD
