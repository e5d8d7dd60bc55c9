//===- LevelLayout.cpp - The pyramid layout as scalars --------------------===//

#include "LevelLayout.h"
#include "LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace mlir::pisa::detail;

LevelLayout::LevelLayout(ImplicitLocOpBuilder &b, Value numKeys,
                         int64_t blockSize, int64_t branching, Value firstRow,
                         Value capacity)
    : block(blockSize), fan(branching), keys(numKeys), firstRow(firstRow) {
  std::optional<int64_t> n = getConstantIntValue(numKeys);
  if (n && *n >= 1 && !capacity) {
    layout.emplace(*n, blockSize, branching);
    leaves = indexConst(b, layout->numLeaves());
    rows = indexConst(b, layout->totalNodes());
    levels = indexConst(b, layout->numLevels());
    rootSpan = indexConst(b, layout->leavesPerNode(layout->numLevels()));
    return;
  }
  // The root is the first level whose nodes span all M_1 leaves: while a
  // node of the top level spans fewer, add a level of ceil(M_1 / span)
  // nodes. N = 0 (M_1 = 0) stops at once with no rows.
  // With a capacity the same loop sums the capacity's rows of levels 1 ..
  // l - 1: where level l starts in the cache.
  Value one = indexConst(b, 1), g = indexConst(b, branching);
  Value cBlock = indexConst(b, blockSize);
  leaves = arith::CeilDivUIOp::create(b, numKeys, cBlock);
  capacityLeaves =
      capacity ? arith::CeilDivUIOp::create(b, capacity, cBlock).getResult()
               : leaves;
  // (Only with a capacity: the IR of the plain layout stays as it was.)
  Type index = b.getIndexType();
  SmallVector<Value> init{one, one, leaves};
  if (capacity)
    init.push_back(indexConst(b, 0));
  SmallVector<Type> types(init.size(), index);
  auto loop = scf::WhileOp::create(
      b, types, init,
      [&](OpBuilder &nb, Location loc, ValueRange st) {
        ImplicitLocOpBuilder cb(loc, nb);
        scf::ConditionOp::create(
            cb, cmp(cb, arith::CmpIPredicate::ult, st[0], leaves), st);
      },
      [&](OpBuilder &nb, Location loc, ValueRange st) {
        ImplicitLocOpBuilder lb(loc, nb);
        Value span = arith::MulIOp::create(lb, st[0], g);
        SmallVector<Value> next{
            span, arith::AddIOp::create(lb, st[1], one),
            arith::AddIOp::create(
                lb, st[2], arith::CeilDivUIOp::create(lb, leaves, span))};
        if (capacity)
          next.push_back(arith::AddIOp::create(
              lb, st[3],
              arith::CeilDivUIOp::create(lb, capacityLeaves, st[0])));
        scf::YieldOp::create(lb, next);
      });
  rootSpan = loop.getResult(0);
  levels = loop.getResult(1);
  rows = loop.getResult(2);
  rootRow = capacity ? loop.getResult(3)
                     : arith::SubIOp::create(b, rows, one).getResult();
}

Value LevelLayout::leafOf(ImplicitLocOpBuilder &b, Value position) const {
  Value last = layout ? indexConst(b, layout->numLeaves() - 1)
                      : arith::SubIOp::create(b, leaves, indexConst(b, 1));
  return arith::MinUIOp::create(
      b, arith::DivUIOp::create(b, position, indexConst(b, block)), last);
}

SmallVector<Value> LevelLayout::walkDown(ImplicitLocOpBuilder &b,
                                         ValueRange state,
                                         StepBody body) const {
  SmallVector<Value> st(state.begin(), state.end());
  auto inBuffer = [&](Value row) {
    return firstRow ? arith::AddIOp::create(b, firstRow, row).getResult() : row;
  };
  if (layout) {
    for (int64_t level = layout->numLevels(); level >= 2; --level) {
      Step step{indexConst(b, layout->leavesPerNode(level)),
                {inBuffer(indexConst(b, layout->offset(level - 1))),
                 indexConst(b, layout->size(level - 1)), indexConst(b, fan),
                 indexConst(b, layout->leavesPerNode(level - 1) * block)}};
      st = body(b, step, st);
    }
    return st;
  }
  // Level l's first row and span carried down: the children's level has
  // ceil(M_1 / (span / g)) nodes and ends where level l starts.
  Value one = indexConst(b, 1), g = indexConst(b, fan);
  // The child level ends where level l starts (in the capacity's layout
  // with a capacity: its node count there, not N's).
  SmallVector<Value> init{rootSpan, inBuffer(rootRow)};
  init.append(st);
  SmallVector<Value> out = buildLoop(
      b, one, levels, init,
      [&](ImplicitLocOpBuilder &lb, Value, ValueRange carried) {
        Value span = carried[0];
        Value childSpan = arith::DivUIOp::create(lb, span, g);
        Value childCount = arith::CeilDivUIOp::create(lb, leaves, childSpan);
        Value childRows =
            capacityLeaves == leaves
                ? childCount
                : arith::CeilDivUIOp::create(lb, capacityLeaves, childSpan)
                      .getResult();
        Value childRow = arith::SubIOp::create(lb, carried[1], childRows);
        Step step{
            span,
            {childRow, childCount, g,
             arith::MulIOp::create(lb, childSpan, indexConst(lb, block))}};
        SmallVector<Value> next{childSpan, childRow};
        next.append(body(lb, step, carried.drop_front(2)));
        return next;
      });
  return SmallVector<Value>(out.begin() + 2, out.end());
}
