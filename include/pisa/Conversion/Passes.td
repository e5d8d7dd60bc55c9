//===- Passes.td - Conversions out of pisa -----------------*- tablegen -*-===//

#ifndef PISA_CONVERSION_PASSES_TD
#define PISA_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertPisaToLinalg : Pass<"convert-pisa-to-linalg"> {
  let summary = "lower pisa ops to linalg, tensor, scf, arith and math";
  let description = [{
    The executable CPU reference of the pisa contract (docs/semantics.md).
    `pisa.pyramid_build` becomes per-level pad + linalg.reduce + mean
    (structured ops). `pisa.lse_score` and `pisa.hier_topk` become scf loops
    over (batch, KV head, query) whose per-query state is bounded by g*K
    candidates: the selection is O(N log N) for a sequence and never
    materialises an Nq x (number of leaf blocks) tensor. The schedule
    attribute does not change what is computed and is ignored here.
    Requires static shapes.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::cf::ControlFlowDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect"
  ];
}

def PisaConfigureKernels : Pass<"pisa-configure-kernels"> {
  let summary = "choose each kernel-level op's #pisa.kernel_config";
  let description = [{
    Writes on every kernel-level op (`pisa.kernel.*`, tensors or buffers)
    the decisions --convert-pisa-to-gpu follows, as `kernel_config =
    #pisa.kernel_config<...>`: the kernel variant (simt, mma_sync, wgmma),
    threads per block, the tile scorer's rows per warp, tiles per block and
    epilogue, the single-stage walk's warps per query, candidate layout and
    level scorer, and the occupancy ptxas keeps registers for (docs/gpu.md,
    "Kernel configurations"). `chip` (sm_90 or sm_90a) is what the target
    offers: wgmma only on sm_90a.

    A configuration already on an op is kept and completed: each field it
    sets must be one the op's kernels support on the chip, apply to the
    op, and agree with the others, or the pass fails naming the field.

    `attention-union-queries` W > 0 gives `pisa.kernel.sparse_attention`
    the query-tile kernel of W queries a block (`union_queries = W`), and
    `pisa.kernel.sparse_attention_grad_queries` query tiles of W queries
    instead of a warp per query, wherever those kernels take the sizes and
    the configuration leaves the choice open; elsewhere the default choice
    stands.

    `kernel-config` asks fields of every op of one kind, as entries
    `OP:FIELD=VALUE` (OP a kernel-level op's name without `pisa.kernel.`,
    FIELD and VALUE as written in #pisa.kernel_config), e.g.
    `kernel-config=sparse_attention:prefetch_ahead=2,sparse_attention_grad_keys:min_blocks_per_sm=1`.
    They are taken over the fields the op's own configuration sets and
    checked like them: a field that op's kernels cannot follow fails the
    pass on the op. An entry naming no kernel-level op, an unknown field or
    a bad value fails the pass; a kind the program lacks is not an error.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "GPU chip the kernels are built for (sm_90 | sm_90a)">,
    Option<"attentionUnionQueries", "attention-union-queries", "int64_t",
           /*default=*/"0",
           "sparse attention on query tiles of this many queries (at most "
           "7) where its kernel takes the sizes (0: the per-query kernels)">,
    ListOption<"kernelConfig", "kernel-config", "std::string",
               "fields asked of every op of one kind: OP:FIELD=VALUE, e.g. "
               "sparse_attention:prefetch_ahead=2">
  ];
}

def ConvertPisaToGPU : Pass<"convert-pisa-to-gpu", "::mlir::ModuleOp"> {
  let summary = "lower kernel-level pisa ops (buffers) to gpu kernels and launches";
  let description = [{
    The GPU lowering's last pisa step, after --pisa-decompose-to-kernels
    and one-shot bufferization: each kernel-level op in buffer form becomes
    its gpu.func kernel(s) in one gpu.module (@pisa_kernels), launched with
    gpu.launch_func where the op was, and every buffer of a function that
    held such ops is device memory (memref.alloc/dealloc become
    gpu.alloc/dealloc). Other pisa ops, and kernel ops on tensors, are an
    error naming the passes that come first.

    `pisa.kernel.pyramid`: a leaf kernel and one launch per upper level.
    `pisa.kernel.select_single_stage`: one kernel, one warp per (query, KV
    head), root to leaves. Two-stage: `walk` leaves at most g*K leaf
    contenders per query (on tensor cores from `fragment_planes` when
    marked); `bucket` sorts the (query, leaf) pairs by leaf (histogram,
    scan, scatter) and cuts each leaf's group into tiles of at most q_tile
    queries; `score_tiles` scores q_tile x G heads per block against the
    leaf's key tile in shared memory; `select_final` keeps the forced
    blocks and the top-K. B, N, Nq and the pyramid's rows may be dynamic:
    kernels read them from their buffers' sizes and walk a layout computed
    from N.

    Each kernel is built as its op's `kernel_config` says
    (--pisa-configure-kernels writes it); an op without one is an error.
    `chip` (sm_90 or sm_90a) is checked against each configuration: wgmma
    needs sm_90a.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "GPU chip the kernels are built for (sm_90 | sm_90a)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::gpu::GPUDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::nvgpu::NVGPUDialect"
  ];
}

def ConvertVectorToMmaSync : Pass<"pisa-vector-to-mma-sync"> {
  let summary = "lower warp tile products (vector.contract) to nvgpu mma.sync";
  let description = [{
    The stage-2 scoring kernel states its dense tile product as a warp-level
    `vector.contract` (16 or 32 query-head rows x C keys x d) between
    `vector.transfer_read`s of shared-memory tiles; the result is written
    back with `vector.transfer_write` or consumed in registers by a row
    epilogue (elementwise ops, `vector.multi_reduction` over the columns,
    row broadcasts, 16-row `vector.reduction`s). This pass unrolls those
    slices to the m16n8k16 shape of mma.sync (k-steps outermost, fragments
    loaded at first use), converts them to `nvgpu.ldmatrix` +
    `nvgpu.mma.sync` (f16 and bf16; upstream's vector-to-gpu in MLIR 22 has
    no bf16 layout and fails on the kernels' scalar index arithmetic), and
    distributes the epilogue over the accumulator layout (lane shuffles
    within quads and across them). bf16 `nvgpu.mma.sync` is then lowered to
    `nvvm.mma.sync` (upstream convert-nvgpu-to-nvvm rejects bf16); f16 is
    left to it. Other vector ops are left alone.
  }];
  let dependentDialects = [
    "::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect", "::mlir::gpu::GPUDialect", "::mlir::nvgpu::NVGPUDialect", "::mlir::vector::VectorDialect",
    "::mlir::memref::MemRefDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect"
  ];
}

def PisaFastExp2ToNVVM : Pass<"pisa-fast-exp2-to-nvvm"> {
  let summary = "lower math.exp2 fastmath<afn> on f32 to ex2.approx.ftz.f32";
  let description = [{
    The kernels' softmax and LSE exponentials are `math.exp2` with
    `fastmath<afn>` (f32 scalars or vectors of any shape, so that the
    mma.sync epilogue distributes them like other elementwise ops). This
    pass rewrites each into `llvm.nvvm.ex2.approx.ftz.f32` calls, element by
    element: one MUFU.EX2 instruction each. Upstream's GPU-to-NVVM lowering
    turns every f32 `math.exp2` into libdevice's `__nv_exp2f`, that is
    `ex2.approx.f32`, which ptxas wraps in a compare and two multiplies to
    return denormal results; terms below 2^-126 against a softmax sum of
    at least 1. Run before convert-gpu-to-nvvm (the pisa GPU pipeline does);
    without it the kernels are correct and slower. Other `math.exp2` ops
    are left alone.
  }];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect", "::mlir::vector::VectorDialect"
  ];
}

#endif // PISA_CONVERSION_PASSES_TD
