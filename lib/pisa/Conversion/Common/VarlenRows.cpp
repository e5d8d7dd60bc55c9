//===- VarlenRows.cpp - Where a packed sequence's pyramid starts ----------===//

#include "VarlenRows.h"
#include "LoopBuilders.h"

#include "pisa/Analysis/PyramidLayout.h"

using namespace mlir;

Value mlir::pisa::detail::firstPyramidRow(ImplicitLocOpBuilder &b,
                                          Value firstKey, Value seq,
                                          int64_t blockSize) {
  Value leaves = arith::DivUIOp::create(b, firstKey, indexConst(b, blockSize));
  return arith::AddIOp::create(
      b, arith::MulIOp::create(b, leaves, indexConst(b, 2)),
      arith::MulIOp::create(b, seq, indexConst(b, kVarlenRowsPerSequence)));
}
