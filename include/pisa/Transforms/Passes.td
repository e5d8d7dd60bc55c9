//===- Passes.td - PISA dialect passes ---------------------*- tablegen -*-===//

#ifndef PISA_TRANSFORMS_PASSES_TD
#define PISA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PisaSelectSchedule : Pass<"pisa-select-schedule"> {
  let summary = "choose two-stage or single-stage kernels for each hier_topk";
  let description = [{
    Applies the IO-cost crossover rule (docs/schedule.md) to every
    `pisa.hier_topk` and attaches `#pisa.schedule<...>` with the choice and
    the IO figures per (query, candidate leaf) pair: two-stage iff
    G + C/Q_tile < C, single-stage when there is one query per sequence.
    The pass only annotates; lowerings read the attribute.

    With `emit-remarks`, each op gets a remark with both IO figures and the
    reason for the choice.
  }];
  let options = [
    Option<"qTile", "q-tile", "int64_t", /*default=*/"4",
           "queries that share one loaded key tile in stage 2">,
    Option<"force", "force", "::mlir::pisa::ScheduleForce",
           /*default=*/"::mlir::pisa::ScheduleForce::Auto",
           "override the rule", [{::llvm::cl::values(
             clEnumValN(::mlir::pisa::ScheduleForce::Auto, "auto",
                        "apply the policy"),
             clEnumValN(::mlir::pisa::ScheduleForce::TwoStage, "two-stage",
                        "always two-stage"),
             clEnumValN(::mlir::pisa::ScheduleForce::SingleStage,
                        "single-stage", "always single-stage"))}]>,
    Option<"policy", "policy", "::mlir::pisa::SchedulePolicy",
           /*default=*/"::mlir::pisa::SchedulePolicy::Paper",
           "which rule decides", [{::llvm::cl::values(
             clEnumValN(::mlir::pisa::SchedulePolicy::Paper, "paper",
                        "G + C/Q_tile < C, as the paper states it"),
             clEnumValN(::mlir::pisa::SchedulePolicy::Refined, "refined",
                        "the same with Q_tile capped at the query count"))}]>,
    Option<"emitRemarks", "emit-remarks", "bool", /*default=*/"false",
           "emit a remark per op with the IO figures and the reason">,
    Option<"keepExisting", "keep-existing", "bool", /*default=*/"false",
           "leave ops that already carry a #pisa.schedule unchanged">
  ];
  let statistics = [
    Statistic<"numTwoStage", "num-two-stage", "hier_topk ops made two-stage">,
    Statistic<"numSingleStage", "num-single-stage",
              "hier_topk ops made single-stage">
  ];
}

def PisaDecomposeToKernels : Pass<"pisa-decompose-to-kernels"> {
  let summary = "decompose pisa ops into the kernel-level ops of their schedule";
  let description = [{
    The GPU lowering's first step. `pisa.pyramid_build` becomes
    `pisa.kernel.pyramid`; a scheduled `pisa.hier_topk` becomes
    `pisa.kernel.select_single_stage` (single_stage) or, for two_stage,
    [`pisa.kernel.fragment_planes` when the walk scores on tensor cores],
    `pisa.kernel.walk`, `pisa.kernel.bucket`, `pisa.kernel.score_tiles` and
    `pisa.kernel.select_final`. All are destination-passing on tensors with
    `tensor.empty` destinations, so one-shot bufferization places every
    buffer. The plan of each op (schedule, GPU limits, kernel variants) is
    made and checked before any IR changes: an op without a
    `#pisa.schedule`, or beyond a GPU limit, is an error naming it.
    Preconditions on dynamic sizes become host `cf.assert`s.

    `pisa.sparse_attention_grad` becomes its query half (dq and D) and its
    key half (dk and dv); marked `pisa.dq_from_scores` (which
    `grad-dq-from-scores` puts on every one), and where the kernels take
    its sizes, it becomes D's kernel op, the key half storing its dS tiles
    and dq from them instead.
  }];
  let options = [
    Option<"gradDqFromScores", "grad-dq-from-scores", "bool",
           /*default=*/"false",
           "mark every pisa.sparse_attention_grad pisa.dq_from_scores">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::cf::ControlFlowDialect",
    "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect"
  ];
}

def PisaFuseDecodeAppend : Pass<"pisa-fuse-decode-append"> {
  let summary = "run a decode step's cache append inside its selection kernel";
  let description = [{
    On kernel-level ops in buffer form (after bufferization): a
    `pisa.kernel.pyramid_append` followed by the
    `pisa.kernel.select_single_stage` of a decode step over the cache it
    updates becomes one `pisa.kernel.append_select_single_stage` (one
    launch instead of two; docs/gpu.md, "A decode step in one kernel").
    Fused when the selection reads a cache (`capacity`) head-major, with
    one query per (batch, KV head) and d dividing the decode block's
    threads; the append is contiguous (no block table), writes that same
    cache with the same C and g over the same static batch; and nothing
    between them but ops without memory effects, allocations and host
    assertions. Everything else is left as it is.
  }];
}

def PisaCheckGPUTarget : Pass<"pisa-check-gpu-target", "::mlir::ModuleOp"> {
  let summary = "reject GPU targets pisa's kernels cannot be built for";
  let description = [{
    The first pass of `pisa-lower-to-nvvm-pipeline`: fails with one error
    naming the supported values when `chip` is not sm_90 or sm_90a, or
    `format` is not isa, bin or fatbin, before any IR is changed (the NVPTX
    backend would otherwise abort on bf16 mma.sync for older chips).
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "GPU chip the kernels are built for">,
    Option<"format", "format", "std::string", /*default=*/"\"fatbin\"",
           "isa | bin | fatbin">
  ];
}

def PisaAddBackwardEntries
    : Pass<"pisa-add-backward-entries", "::mlir::ModuleOp"> {
  let summary = "give each attention entry point a training forward and a "
                "backward";
  let description = [{
    For every public function F whose only result is the output of a
    `pisa.sparse_attention` whose queries, keys and values are arguments
    of F, adds two public functions (docs/gpu.md, "Training entry
    points"):

      F_forward(F's arguments) -> (o, lse[, selection])
      F_backward(F's arguments[, selection], o, lse, dO) -> (dq, dk, dv)

    F_forward is F returning the attention's lse beside its output (and the
    selection, when F computes it); F_backward applies
    `pisa.sparse_attention_grad` with the same selection, offset, block
    size, scale and layout, its gradients in the element types of q, k and
    v. Results carry `pisa.name`. F gets `pisa.backward = {forward =
    @F_forward, backward = @F_backward, inputs = [iq, ik, iv], token_major
    = ...}` (the arguments the gradients are of, and the attention's
    layout).

    When the GPU lowering refuses the backward's shapes
    (KernelLoweringOpInterface), F instead gets `pisa.no_backward` with the
    reason, or, with `require`, the pass fails naming it. A function named
    F_forward or F_backward already is an error; a function that has
    `pisa.backward` or `pisa.no_backward` is left as it is (the pass can
    run again).
  }];
  let options = [
    Option<"require", "require", "bool", /*default=*/"false",
           "fail when an attention entry point's backward cannot be lowered">
  ];
}

#endif // PISA_TRANSFORMS_PASSES_TD
