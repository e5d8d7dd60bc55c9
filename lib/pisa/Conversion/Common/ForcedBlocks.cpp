//===- ForcedBlocks.cpp - The forced leaf blocks of a query ---------------===//

#include "ForcedBlocks.h"
#include "LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::pisa::detail;

Value mlir::pisa::detail::previousBlock(ImplicitLocOpBuilder &b, Value bt) {
  Value one = indexConst(b, 1);
  return arith::SubIOp::create(b, arith::MaxUIOp::create(b, bt, one), one);
}

Value mlir::pisa::detail::isForcedBlock(ImplicitLocOpBuilder &b, Value node,
                                        Value bt, Value previous) {
  using P = arith::CmpIPredicate;
  return arith::OrIOp::create(
      b,
      arith::OrIOp::create(b, cmp(b, P::eq, node, indexConst(b, 0)),
                           cmp(b, P::eq, node, bt)),
      cmp(b, P::eq, node, previous));
}

Value mlir::pisa::detail::isLeafContender(ImplicitLocOpBuilder &b, Value node,
                                          Value bt, Value previous) {
  Value forced = isForcedBlock(b, node, bt, previous);
  Value causal = cmp(b, arith::CmpIPredicate::ule, node, bt);
  return arith::AndIOp::create(
      b, causal,
      arith::XOrIOp::create(b, forced, arith::ConstantIntOp::create(b, 1, 1)));
}

Value mlir::pisa::detail::forcedBlockCount(ImplicitLocOpBuilder &b, Value bt) {
  using P = arith::CmpIPredicate;
  Value one = indexConst(b, 1), two = indexConst(b, 2);
  return arith::SelectOp::create(
      b, cmp(b, P::uge, bt, two), indexConst(b, 3),
      arith::SelectOp::create(b, cmp(b, P::uge, bt, one), two, one));
}

Value mlir::pisa::detail::forcedBlocksBelow(ImplicitLocOpBuilder &b, Value x,
                                            Value bt, Value previous) {
  using P = arith::CmpIPredicate;
  Value zero = indexConst(b, 0), one = indexConst(b, 1), two = indexConst(b, 2);
  auto asIndex = [&](Value flag) -> Value {
    return arith::SelectOp::create(b, flag, one, zero);
  };
  Value previousBelow = arith::AndIOp::create(b, cmp(b, P::uge, bt, two),
                                              cmp(b, P::ult, previous, x));
  Value currentBelow =
      arith::AndIOp::create(b, cmp(b, P::uge, bt, one), cmp(b, P::ult, bt, x));
  return arith::AddIOp::create(
      b, one,
      arith::AddIOp::create(b, asIndex(previousBelow), asIndex(currentBelow)));
}
