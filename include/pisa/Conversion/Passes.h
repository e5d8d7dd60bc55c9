//===- Passes.h - Conversions out of pisa -----------------------*- C++ -*-===//

#ifndef PISA_CONVERSION_PASSES_H
#define PISA_CONVERSION_PASSES_H

#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/Conversion/PisaToLinalg/PisaToLinalg.h"
#include "pisa/Conversion/VectorToMMA/VectorToMMA.h"

#include "mlir/Pass/Pass.h"

namespace mlir::pisa {

#define GEN_PASS_DECL
#include "pisa/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pisa/Conversion/Passes.h.inc"

} // namespace mlir::pisa

#endif // PISA_CONVERSION_PASSES_H
