//===- VarlenRows.h - Where a packed sequence's pyramid starts --*- C++ -*-===//
//
// The varlen pyramid layout of docs/semantics.md, section 7, as IR: one
// definition for the CPU loops and the GPU kernels.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_COMMON_VARLENROWS_H
#define PISA_LIB_CONVERSION_COMMON_VARLENROWS_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::pisa::detail {

/// R_b = 2 floor(cu_k[b] / C) + 32 b: sequence `seq`'s first pyramid row,
/// `firstKey` = cu_k[b]. With cu_k[B] = Tk and seq = B it is R, the rows
/// of the whole pyramid. Index values.
Value firstPyramidRow(ImplicitLocOpBuilder &b, Value firstKey, Value seq,
                      int64_t blockSize);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_COMMON_VARLENROWS_H
