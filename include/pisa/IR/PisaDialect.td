//===- PisaDialect.td - PISA dialect definition ------------*- tablegen -*-===//
//
// The `pisa` dialect: pyramid-indexed sparse attention block selection.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_IR_PISADIALECT_TD
#define PISA_IR_PISADIALECT_TD

include "mlir/IR/OpBase.td"

def Pisa_Dialect : Dialect {
  let name = "pisa";
  let cppNamespace = "::mlir::pisa";
  let summary = "Hierarchical (pyramid) block selection for sparse attention";
  let description = [{
    The `pisa` dialect expresses the block selection of PISA block-sparse
    attention: a mean-pooled pyramid over the keys (`pisa.pyramid_build`),
    LogSumExp scores of pyramid nodes from their children
    (`pisa.lse_score`), and the coarse-to-fine top-K walk that picks the
    leaf key blocks each query attends to (`pisa.hier_topk`). Selection
    costs O(N log N) for a sequence of N queries instead of O(N^2).

    All ops have value (tensor) semantics. The exact contract, including
    masking and tie rules, is in the project's `docs/semantics.md`.
  }];
  let useDefaultAttributePrinterParser = 1;
}

class Pisa_Op<string mnemonic, list<Trait> traits = []>
    : Op<Pisa_Dialect, mnemonic, traits>;

#endif // PISA_IR_PISADIALECT_TD
