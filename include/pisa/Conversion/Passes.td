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

#endif // PISA_CONVERSION_PASSES_TD
