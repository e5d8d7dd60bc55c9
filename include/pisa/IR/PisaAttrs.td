//===- PisaAttrs.td - PISA attributes ----------------------*- tablegen -*-===//
//
// The schedule attribute that `--pisa-select-schedule` attaches to
// `pisa.hier_topk` and that the lowerings consume.
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

#endif // PISA_IR_PISAATTRS_TD
