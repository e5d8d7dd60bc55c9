//===- LayoutTables.cpp - The pyramid layout as IR values -----------------===//

#include "LayoutTables.h"
#include "LoopBuilders.h"

#include "pisa/Analysis/PyramidLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace mlir::pisa::detail;

static RankedTensorType tableType(MLIRContext *ctx) {
  return RankedTensorType::get({kMaxLevels + 1}, IndexType::get(ctx));
}

/// Constant tables from PyramidLayout, for a static N.
static LayoutTables constantTables(ImplicitLocOpBuilder &b, int64_t numKeys,
                                   int64_t blockSize, int64_t branching) {
  mlir::pisa::PyramidLayout layout(numKeys, blockSize, branching);
  auto table = [&](llvm::function_ref<int64_t(int64_t)> entry) -> Value {
    SmallVector<APInt> values(kMaxLevels + 1, APInt(64, 0));
    for (int64_t l = 1; l <= layout.numLevels(); ++l)
      values[l] = APInt(64, entry(l));
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(tableType(b.getContext()), values));
  };
  return {table([&](int64_t l) { return layout.size(l); }),
          table([&](int64_t l) { return layout.offset(l); }),
          table([&](int64_t l) { return layout.leavesPerNode(l); }),
          indexConst(b, layout.numLevels()),
          indexConst(b, layout.numLeaves()),
          indexConst(b, layout.totalNodes())};
}

LayoutTables mlir::pisa::detail::buildLayoutTables(ImplicitLocOpBuilder &b,
                                                   Value numKeys,
                                                   int64_t blockSize,
                                                   int64_t branching) {
  if (std::optional<int64_t> n = getConstantIntValue(numKeys); n && *n >= 1)
    return constantTables(b, *n, blockSize, branching);

  // M_1 = ceil(N / C); level l is recorded while the one below had more
  // than one node: M_{l+1} = ceil(M_l / g), offsets accumulate, spans
  // multiply by g. Entries past the last level stay 0.
  Value zero = indexConst(b, 0), one = indexConst(b, 1);
  Value g = indexConst(b, branching);
  Value leaves =
      arith::CeilDivUIOp::create(b, numKeys, indexConst(b, blockSize));
  Value empty = arith::ConstantOp::create(
      b, DenseElementsAttr::get(tableType(b.getContext()), APInt(64, 0)));
  Value noLevels = cmp(b, arith::CmpIPredicate::eq, leaves, zero);
  SmallVector<Value> init{empty, empty, empty, leaves,
                          zero,  one,   zero,  noLevels};
  auto st = buildLoop(
      b, one, indexConst(b, kMaxLevels + 1), init,
      [&](ImplicitLocOpBuilder &lb, Value l, ValueRange s) {
        Value size = s[3], offset = s[4], span = s[5];
        Value active = arith::XOrIOp::create(
            lb, s[7], arith::ConstantIntOp::create(lb, 1, 1));
        auto record = [&](Value table, Value v) -> Value {
          return tensor::InsertOp::create(
              lb, arith::SelectOp::create(lb, active, v, zero), table, l);
        };
        return SmallVector<Value>{
            record(s[0], size),
            record(s[1], offset),
            record(s[2], span),
            arith::CeilDivUIOp::create(lb, size, g),
            arith::SelectOp::create(
                lb, active, arith::AddIOp::create(lb, offset, size), offset),
            arith::SelectOp::create(lb, active,
                                    arith::MulIOp::create(lb, span, g), span),
            arith::SelectOp::create(lb, active, l, s[6]),
            arith::OrIOp::create(lb, s[7],
                                 cmp(lb, arith::CmpIPredicate::eq, size, one))};
      });
  return {st[0], st[1], st[2], st[6], leaves, st[4]};
}
