//===- PisaDialect.cpp - PISA dialect and attributes ----------------------===//

#include "pisa/IR/PisaDialect.h"
#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/IR/PisaAttrs.h"
#include "pisa/IR/PisaInterfaces.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::pisa;

#include "pisa/IR/PisaEnums.cpp.inc"
#include "pisa/IR/PisaOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "pisa/IR/PisaAttrs.cpp.inc"

#include "pisa/IR/PisaInterfaces.cpp.inc"

void PisaDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "pisa/IR/PisaOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "pisa/IR/PisaAttrs.cpp.inc"
      >();
  // The GPU path's models (KernelLowering.cpp) are attached by
  // registerKernelLoweringExternalModels; using one unregistered is an
  // error that names it.
  declarePromisedInterfaces<KernelLoweringOpInterface, PyramidBuildOp,
                            PyramidBuildVarlenOp, LseScoreOp, HierTopKOp,
                            HierTopKVarlenOp, PyramidAppendOp, DecodeSelectOp,
                            SparseAttentionOp>();
}

LogicalResult ScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   ScheduleKind kind, int64_t qTile,
                                   int64_t ioTwoStage, int64_t ioSingleStage) {
  if (qTile < 1 || qTile > kMaxQueryTile)
    return emitError() << "expected q_tile in [1, " << kMaxQueryTile
                       << "] but got " << qTile;
  if (ioTwoStage < 0 || ioSingleStage < 0)
    return emitError() << "expected non-negative IO figures but got "
                       << ioTwoStage << " and " << ioSingleStage;
  return success();
}
