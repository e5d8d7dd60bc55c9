//===- PisaInterfaces.td - How a pisa op becomes kernels ----*- tablegen -*-===//
//
// The one place an op says how the GPU path takes it: its limits, its
// kernel-level ops, and what an AOT entry point says of the values it reads.
// --pisa-decompose-to-kernels, the limit checks and pisa-compile's manifest
// ask the interface and know no op by name. The models live beside the
// lowering (lib/pisa/Conversion/PisaToGPU/KernelLowering.cpp), attached by
// registerKernelLoweringExternalModels, so the dialect does not depend on
// its lowering.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_IR_PISAINTERFACES_TD
#define PISA_IR_PISAINTERFACES_TD

include "mlir/IR/OpBase.td"

def Pisa_KernelLoweringOpInterface : OpInterface<"KernelLoweringOpInterface"> {
  let description = [{
    A user-level pisa op that the GPU path decomposes into kernel-level ops
    (`pisa.kernel.*`, PisaKernelOps.td). An op that does not implement it
    has no GPU lowering.
  }];
  let cppNamespace = "::mlir::pisa";
  let methods = [
    InterfaceMethod<[{
        Why the GPU kernels cannot take this op's static shapes and
        attributes, as one clause naming the limit ("has N = ... above the
        GPU limit of ... (why)"), or nothing. Limits on dynamic sizes are
        host assertions that decomposeToKernels writes.
      }], "std::optional<std::string>", "getGPULimitViolation">,
    InterfaceMethod<[{
        Emits an error on the op and fails when it cannot be decomposed: a
        GPU limit, or what must run first. Decomposition changes no IR
        until every op has passed this check.
      }], "::llvm::LogicalResult", "verifyKernelDecomposition", (ins), [{}],
      [{
        auto self = ::llvm::cast<::mlir::pisa::KernelLoweringOpInterface>(
            $_op.getOperation());
        if (std::optional<std::string> why = self.getGPULimitViolation())
          return $_op->emitOpError() << *why;
        return ::mlir::success();
      }]>,
    InterfaceMethod<[{
        Replaces the op with its kernel-level ops, destination-passing on
        tensors, preceded by host assertions on the sizes only known at run
        time. Called only after verifyKernelDecomposition succeeded.
      }], "void", "decomposeToKernels",
      (ins "::mlir::RewriterBase &":$rewriter)>,
    InterfaceMethod<[{
        Adds what an AOT entry point must know of the values this op reads
        and returns (EntryFacts): index ranges, values a call's validation
        checks, caches the call updates in place, a selection's layout.
      }], "void", "describeEntry",
      (ins "::mlir::pisa::EntryFacts &":$facts), [{}], [{ return; }]>,
  ];
}

#endif // PISA_IR_PISAINTERFACES_TD
