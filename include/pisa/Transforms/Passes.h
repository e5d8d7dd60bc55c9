//===- Passes.h - PISA dialect passes ---------------------------*- C++ -*-===//

#ifndef PISA_TRANSFORMS_PASSES_H
#define PISA_TRANSFORMS_PASSES_H

#include "pisa/Analysis/IOCostModel.h"

#include "mlir/Pass/Pass.h"

namespace mlir::pisa {

/// `force` option of --pisa-select-schedule.
enum class ScheduleForce { Auto, TwoStage, SingleStage };

#define GEN_PASS_DECL
#include "pisa/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pisa/Transforms/Passes.h.inc"

} // namespace mlir::pisa

#endif // PISA_TRANSFORMS_PASSES_H
