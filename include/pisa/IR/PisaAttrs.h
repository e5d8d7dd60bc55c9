//===- PisaAttrs.h - PISA attributes ----------------------------*- C++ -*-===//

#ifndef PISA_IR_PISAATTRS_H
#define PISA_IR_PISAATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Operation.h"

#include "pisa/IR/PisaEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "pisa/IR/PisaAttrs.h.inc"

namespace mlir::pisa {
/// The attribute of a kernel-level op that holds its #pisa.kernel_config.
constexpr llvm::StringLiteral kKernelConfigAttrName = "kernel_config";
/// On pisa.sparse_attention_grad: dq from the key half's dS tiles (a D
/// kernel, the key kernel storing its tiles, a dq kernel reading them)
/// where the GPU kernels take the sizes, instead of a dq pass that
/// recomputes them (docs/gpu.md, "Sparse attention backward").
constexpr llvm::StringLiteral kDqFromScoresAttrName = "pisa.dq_from_scores";

/// The configuration of kernel-level op `op`, or null when it has none.
inline KernelConfigAttr getKernelConfig(Operation *op) {
  return op->getAttrOfType<KernelConfigAttr>(kKernelConfigAttrName);
}
} // namespace mlir::pisa

#endif // PISA_IR_PISAATTRS_H
