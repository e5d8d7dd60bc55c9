//===- PisaAttrs.td - PISA attributes ----------------------*- tablegen -*-===//
//
// The schedule attribute that `--pisa-select-schedule` attaches to
// `pisa.hier_topk` and that the lowerings consume; the kernel configuration
// that `--pisa-configure-kernels` attaches to each kernel-level op and that
// `--convert-pisa-to-gpu` reads.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_IR_PISAATTRS_TD
#define PISA_IR_PISAATTRS_TD

include "pisa/IR/PisaDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Pisa_ScheduleKind : I32EnumAttr<"ScheduleKind",
    "how hierarchical top-K is split into kernels", [
      I32EnumAttrCase<"TwoStage", 0, "two_stage">,
      I32EnumAttrCase<"SingleStage", 1, "single_stage">
    ]> {
  let cppNamespace = "::mlir::pisa";
  let genSpecializedAttr = 0;
}

def Pisa_ScheduleAttr : AttrDef<Pisa_Dialect, "Schedule"> {
  let mnemonic = "schedule";
  let summary = "kernel schedule chosen for a hier_topk, with its IO figures";
  let description = [{
    Records the schedule chosen by `--pisa-select-schedule` and why:
    `kind` is `two_stage` (prefill: coarse levels, then leaf tiles shared by
    `q_tile` queries) or `single_stage` (one fused kernel per query).
    `io_two_stage` and `io_single_stage` are the values each schedule loads
    per (query, candidate leaf) pair, in elements, rounded up:
    G*d + ceil(C*d / q_tile) and C*d.

    ```mlir
    #pisa.schedule<two_stage, q_tile = 4, io_two_stage = 4096, io_single_stage = 8192>
    ```
  }];
  let parameters = (ins
    EnumParameter<Pisa_ScheduleKind>:$kind,
    "int64_t":$qTile,
    "int64_t":$ioTwoStage,
    "int64_t":$ioSingleStage
  );
  let assemblyFormat = [{
    `<` $kind `,` `q_tile` `=` $qTile `,` `io_two_stage` `=` $ioTwoStage `,`
    `io_single_stage` `=` $ioSingleStage `>`
  }];
  let genVerifyDecl = 1;
}

def Pisa_KernelVariant : I32EnumAttr<"KernelVariant",
    "the instructions a kernel computes its products with", [
      I32EnumAttrCase<"Simt", 0, "simt">,
      I32EnumAttrCase<"MmaSync", 1, "mma_sync">,
      I32EnumAttrCase<"Wgmma", 2, "wgmma">
    ]> {
  let cppNamespace = "::mlir::pisa";
  let genSpecializedAttr = 0;
}

def Pisa_CandidateWalk : I32EnumAttr<"CandidateWalk",
    "how a query's block of warps holds the walk's candidates", [
      I32EnumAttrCase<"Lanes", 0, "lanes">,
      I32EnumAttrCase<"Ranks", 1, "ranks">
    ]> {
  let cppNamespace = "::mlir::pisa";
  let genSpecializedAttr = 0;
}

def Pisa_KernelEpilogue : I32EnumAttr<"KernelEpilogue",
    "where a kernel finishes its tensor-core accumulators", [
      I32EnumAttrCase<"Registers", 0, "registers">,
      I32EnumAttrCase<"Shared", 1, "shared">
    ]> {
  let cppNamespace = "::mlir::pisa";
  let genSpecializedAttr = 0;
}

def Pisa_KernelConfigAttr : AttrDef<Pisa_Dialect, "KernelConfig"> {
  let mnemonic = "kernel_config";
  let summary = "how --convert-pisa-to-gpu builds a kernel-level op's kernel";
  let description = [{
    Every decision the GPU lowering makes for one kernel-level op, chosen by
    `--pisa-configure-kernels` (docs/gpu.md, "Kernel configurations") and
    read by `--convert-pisa-to-gpu` as the op's `kernel_config`:

    - `variant`: `simt`, `mma_sync` (warp tensor cores) or `wgmma`
      (warpgroup tensor cores, sm_90a); for the single-stage selection, the
      leaves' scorer.
    - `threads`: threads per block of the op's main kernel (follows from
      the other fields; may be left out of a hand-written configuration).
    - `warps_per_query`: warps that share one query (single-stage
      selection: 1, or a block of 16 for decode).
    - `walk`: how such a block holds the walk's candidates, one per lane
      (`lanes`, g * K <= 32) or ranked in shared memory (`ranks`).
    - `level_variant`: the scorer of the walk's levels (`lanes` walk).
    - `rows_per_warp`, `tiles_per_block`: the tensor-core tile scorer's
      rows per warp and the tiles one block scores in turn.
    - `epilogue`: whether the accumulators are finished in `registers` or
      through `shared` memory (tile scorer, attention).
    - `union_queries`: sparse attention on query tiles: the consecutive
      queries of a block, a warp each, that attend the union of their
      blocks, each block read once (absent: each query gathers its own;
      the kernels take at most 8).
    - `min_blocks_per_sm`: the occupancy ptxas keeps registers for.
    - `prefetch_ahead`: how far ahead a kernel asks the L2 for rows it will
      copy (cp.async.bulk.prefetch.L2); 0: it does not. The register key
      kernel of the backward counts steps (step s + n's Q and dO rows when
      step s + 1's copies are issued), the dq kernel from dS tiles attended
      blocks (the next block's dS tile).

    Fields an op does not use are absent. A hand-written configuration may
    set any of the fields (`<>`: none): --pisa-configure-kernels keeps
    them where the op's kernels follow them and chooses the rest;
    --convert-pisa-to-gpu takes only a complete one.

    ```mlir
    #pisa.kernel_config<variant = wgmma, threads = 128, tiles_per_block = 8, min_blocks_per_sm = 5>
    #pisa.kernel_config<prefetch_ahead = 2>
    ```
  }];
  let parameters = (ins
    OptionalParameter<"std::optional<::mlir::pisa::KernelVariant>">:$variant,
    "int64_t":$threads,
    OptionalParameter<"std::optional<int64_t>">:$warpsPerQuery,
    OptionalParameter<"std::optional<::mlir::pisa::CandidateWalk>">:$walk,
    OptionalParameter<"std::optional<::mlir::pisa::KernelVariant>">:$levelVariant,
    OptionalParameter<"std::optional<int64_t>">:$rowsPerWarp,
    OptionalParameter<"std::optional<int64_t>">:$tilesPerBlock,
    OptionalParameter<"std::optional<::mlir::pisa::KernelEpilogue>">:$epilogue,
    OptionalParameter<"std::optional<int64_t>">:$minBlocksPerSM,
    OptionalParameter<"std::optional<int64_t>">:$unionQueries,
    OptionalParameter<"std::optional<int64_t>">:$prefetchAhead
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// This configuration with every field `over` sets taken from `over`
    /// (`over` itself where this one is null).
    KernelConfigAttr overriddenBy(KernelConfigAttr over) const;
  }];
}

#endif // PISA_IR_PISAATTRS_TD
