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
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def ConvertPisaToGPU : Pass<"convert-pisa-to-gpu", "::mlir::ModuleOp"> {
  let summary = "lower pisa ops to gpu kernels launched from the host function";
  let description = [{
    Kernels are gpu.func in one gpu.module (@pisa_kernels), launched with
    gpu.launch_func on bufferization views of the ops' tensors; results live
    in device buffers (gpu.alloc).

    `pisa.pyramid_build`: a leaf kernel and one launch per upper level.
    `pisa.hier_topk` follows its `#pisa.schedule` (an op without one is an
    error that names --pisa-select-schedule):
    - `single_stage`: one kernel, one thread per (query, KV head), root to
      leaves.
    - `two_stage`: a walk kernel for levels L..2 leaving at most g*K leaf
      contenders per query; a counting sort of the (query, leaf) pairs by
      leaf (histogram, scan, scatter) whose groups are cut into tiles of at
      most q_tile queries; one block per tile scoring q_tile x G heads
      against the leaf's key tile in shared memory; a final kernel with the
      forced blocks and the top-K.
    Nothing is shaped Nq x (number of leaves). B, N, Nq and the pyramid's
    rows may be dynamic: kernels read them from their buffers' sizes and walk
    a layout computed from N; preconditions that only run time can check
    (equal sizes, grid and index limits) are cf.assert on the host.
  }];
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

#endif // PISA_CONVERSION_PASSES_TD
