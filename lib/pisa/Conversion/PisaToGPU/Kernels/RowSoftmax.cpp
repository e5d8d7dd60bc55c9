//===- RowSoftmax.cpp - The row LogSumExp and online softmax -------------===//

#include "Kernels/RowSoftmax.h"
#include "Kernels/KernelBuilder.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::pisa::detail;

static constexpr float kNegInf = -std::numeric_limits<float>::infinity();

Value mlir::pisa::detail::laneAllReduce(ImplicitLocOpBuilder &b, Value v,
                                        ArrayRef<int64_t> masks, bool isMax) {
  for (int64_t mask : masks) {
    Value other = shuffleXor(b, v, mask);
    v = isMax ? arith::MaximumFOp::create(b, v, other).getResult()
              : arith::AddFOp::create(b, v, other).getResult();
  }
  return v;
}

Value mlir::pisa::detail::laneSum(ImplicitLocOpBuilder &b, Value v,
                                  ArrayRef<int64_t> masks) {
  return laneAllReduce(b, v, masks, /*isMax=*/false);
}

SmallVector<int64_t> mlir::pisa::detail::halvingLaneMasks(int64_t width) {
  SmallVector<int64_t> masks;
  for (int64_t mask = width / 2; mask >= 1; mask /= 2)
    masks.push_back(mask);
  return masks;
}

Value mlir::pisa::detail::headSumInShared(ImplicitLocOpBuilder &b, Value lses,
                                          Value first, int64_t G) {
  Value heads = vector::LoadOp::create(b, VectorType::get({G}, b.getF32Type()),
                                       lses, ValueRange{first});
  return vector::ReductionOp::create(b, vector::CombiningKind::ADD, heads);
}

Value mlir::pisa::detail::maskedLogit(ImplicitLocOpBuilder &b, Value x,
                                      Value visible, Value scale,
                                      Value negInf) {
  return arith::SelectOp::create(b, visible, arith::MulFOp::create(b, x, scale),
                                 negInf);
}

Value mlir::pisa::detail::maskedRowLogits(ImplicitLocOpBuilder &b, Value raw,
                                          Value columns, Value visible,
                                          float scale) {
  auto rowType = cast<VectorType>(raw.getType());
  // mask[i] = columns[i] < visible (what vector.create_mask means for an
  // iota; the NVVM tail does not lower create_mask itself).
  Value mask = arith::CmpIOp::create(
      b, arith::CmpIPredicate::slt, columns,
      vector::BroadcastOp::create(
          b, columns.getType(),
          arith::IndexCastOp::create(b, b.getI32Type(), visible)));
  return arith::SelectOp::create(
      b, mask,
      arith::MulFOp::create(b, raw, f32Splat(b, rowType, scale * kLog2E)),
      f32Splat(b, rowType, kNegInf));
}

SmallVector<int64_t> mlir::pisa::detail::consecutiveLaneMasks(int64_t width) {
  SmallVector<int64_t> masks;
  for (int64_t mask = 1; mask < width; mask *= 2)
    masks.push_back(mask);
  return masks;
}

Value mlir::pisa::detail::emptyRowShift(ImplicitLocOpBuilder &b, Value max) {
  Value empty = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, max,
                                      f32Const(b, kNegInf));
  return arith::SelectOp::create(b, empty, f32Const(b, 0.0f), max);
}

Value mlir::pisa::detail::shiftedExp2(ImplicitLocOpBuilder &b, Value x,
                                      Value shift) {
  return fastExp2(b, arith::SubFOp::create(b, x, shift));
}

Value mlir::pisa::detail::lse2FromSum(ImplicitLocOpBuilder &b, Value shift,
                                      Value sum) {
  return arith::AddFOp::create(b, shift, fastLog2(b, sum));
}

Value mlir::pisa::detail::toBaseE(ImplicitLocOpBuilder &b, Value x) {
  return arith::MulFOp::create(b, x, f32Const(b, kLn2));
}

Value mlir::pisa::detail::rowMax(ImplicitLocOpBuilder &b,
                                 ArrayRef<Value> logits,
                                 ArrayRef<int64_t> laneMasks) {
  Value m = logits[0];
  for (Value x : logits.drop_front())
    m = arith::MaximumFOp::create(b, m, x);
  return laneAllReduce(b, m, laneMasks, /*isMax=*/true);
}

Value mlir::pisa::detail::scaledRowLse2(ImplicitLocOpBuilder &b,
                                        ArrayRef<Value> products, Value scale,
                                        ArrayRef<int64_t> laneMasks) {
  Value shift = arith::MulFOp::create(b, rowMax(b, products, laneMasks), scale);
  Value negShift = arith::NegFOp::create(b, shift);
  Value total = f32Const(b, 0.0f);
  for (Value x : products)
    total = arith::AddFOp::create(
        b, total, fastExp2(b, math::FmaOp::create(b, x, scale, negShift)));
  total = laneAllReduce(b, total, laneMasks, /*isMax=*/false);
  return lse2FromSum(b, shift, total);
}

OnlineMax mlir::pisa::detail::onlineMaxStep(ImplicitLocOpBuilder &b,
                                            Value oldMax, Value blockMax) {
  Value max = arith::MaximumFOp::create(b, oldMax, blockMax);
  // A row that has seen no key yet keeps max = -inf: shift by 0 there.
  return {max, emptyRowShift(b, max)};
}

Value mlir::pisa::detail::rescaleFactor(ImplicitLocOpBuilder &b, Value oldMax,
                                        Value shift) {
  return shiftedExp2(b, oldMax, shift);
}

Value mlir::pisa::detail::rescaledSum(ImplicitLocOpBuilder &b, Value sum,
                                      Value alpha, Value blockSum) {
  return arith::AddFOp::create(b, arith::MulFOp::create(b, sum, alpha),
                               blockSum);
}

std::pair<Value, Value> mlir::pisa::detail::rowEnd(ImplicitLocOpBuilder &b,
                                                   Value max, Value sum) {
  Value empty = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, sum,
                                      f32Const(b, 0.0f));
  Value inverse =
      arith::SelectOp::create(b, empty, f32Const(b, 0.0f),
                              arith::DivFOp::create(b, f32Const(b, 1.0f), sum));
  Value lse = arith::SelectOp::create(b, empty, f32Const(b, kNegInf),
                                      toBaseE(b, lse2FromSum(b, max, sum)));
  return {inverse, lse};
}
