//===- PackedSequences.cpp - Varlen batches inside kernels ----------------===//

#include "Selection/PackedSequences.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::pisa::detail;

Value mlir::pisa::detail::viewAsBatchOfOne(ImplicitLocOpBuilder &b,
                                           Value packed) {
  ArrayRef<int64_t> s = cast<MemRefType>(packed.getType()).getShape();
  SmallVector<OpFoldResult> sizes{b.getIndexAttr(1), dimOf(b, packed, 0),
                                  b.getIndexAttr(s[1]), b.getIndexAttr(s[2])};
  Value expanded = memref::ExpandShapeOp::create(
      b, ArrayRef<int64_t>{1, s[0], s[1], s[2]}, packed,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}}, sizes);
  auto swap = AffineMapAttr::get(AffineMap::getPermutationMap(
      ArrayRef<unsigned>{0, 2, 1, 3}, b.getContext()));
  return memref::TransposeOp::create(b, expanded, swap);
}

Value mlir::pisa::detail::cuEntry(ImplicitLocOpBuilder &b, Value cu, Value at) {
  return arith::IndexCastOp::create(
      b, b.getIndexType(), memref::LoadOp::create(b, cu, ValueRange{at}));
}

Value mlir::pisa::detail::findSequence(
    ImplicitLocOpBuilder &b, Value numSeqs, Value slot,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> firstSlot) {
  // [lo, hi) holds the answer once firstSlot(lo) <= slot: halve it.
  Value one = indexConst(b, 1), two = indexConst(b, 2);
  Type index = b.getIndexType();
  auto loop = scf::WhileOp::create(
      b, TypeRange{index, index}, ValueRange{indexConst(b, 0), numSeqs},
      [&](OpBuilder &nb, Location loc, ValueRange st) {
        ImplicitLocOpBuilder cb(loc, nb);
        Value width = arith::SubIOp::create(cb, st[1], st[0]);
        scf::ConditionOp::create(
            cb, cmp(cb, arith::CmpIPredicate::sgt, width, one), st);
      },
      [&](OpBuilder &nb, Location loc, ValueRange st) {
        ImplicitLocOpBuilder lb(loc, nb);
        Value mid = arith::DivUIOp::create(
            lb, arith::AddIOp::create(lb, st[0], st[1]), two);
        Value below =
            cmp(lb, arith::CmpIPredicate::sle, firstSlot(lb, mid), slot);
        scf::YieldOp::create(
            lb, ValueRange{arith::SelectOp::create(lb, below, mid, st[0]),
                           arith::SelectOp::create(lb, below, st[1], mid)});
      });
  return loop.getResult(0);
}

Value mlir::pisa::detail::batchRulesHold(ImplicitLocOpBuilder &b, Value cuKeys,
                                         Value numKeyRows, Value cuQueries,
                                         Value numQueryRows) {
  using P = arith::CmpIPredicate;
  Value zero = indexConst(b, 0), one = indexConst(b, 1);
  Value numSeqs = arith::SubIOp::create(b, dimOf(b, cuKeys, 0), one);
  auto ends = [&](ImplicitLocOpBuilder &eb, Value cu, Value rows) {
    return arith::AndIOp::create(
        eb, cmp(eb, P::eq, cuEntry(eb, cu, zero), zero),
        cmp(eb, P::eq, cuEntry(eb, cu, numSeqs), rows));
  };
  Value ok = ends(b, cuKeys, numKeyRows);
  if (cuQueries)
    ok = arith::AndIOp::create(b, ok, ends(b, cuQueries, numQueryRows));
  return buildLoop(
      b, zero, numSeqs, {ok},
      [&](ImplicitLocOpBuilder &lb, Value s, ValueRange acc) {
        Value next = arith::AddIOp::create(lb, s, one);
        Value k0 = cuEntry(lb, cuKeys, s), k1 = cuEntry(lb, cuKeys, next);
        Value holds =
            arith::AndIOp::create(lb, acc[0], cmp(lb, P::sle, k0, k1));
        if (cuQueries) {
          Value q0 = cuEntry(lb, cuQueries, s),
                q1 = cuEntry(lb, cuQueries, next);
          holds = arith::AndIOp::create(
              lb, holds,
              arith::AndIOp::create(lb, cmp(lb, P::sle, q0, q1),
                                    cmp(lb, P::sle,
                                        arith::SubIOp::create(lb, q1, q0),
                                        arith::SubIOp::create(lb, k1, k0))));
        }
        return SmallVector<Value>{holds};
      })[0];
}

PackedKeys mlir::pisa::detail::packedKeys(ImplicitLocOpBuilder &b, Value cuKeys,
                                          Value numKeyRows, Value seq) {
  using P = arith::CmpIPredicate;
  Value first = cuEntry(b, cuKeys, seq);
  Value end =
      cuEntry(b, cuKeys, arith::AddIOp::create(b, seq, indexConst(b, 1)));
  Value valid = arith::AndIOp::create(
      b, cmp(b, P::sge, first, indexConst(b, 0)),
      arith::AndIOp::create(b, cmp(b, P::sle, first, end),
                            cmp(b, P::sle, end, numKeyRows)));
  return {first, arith::SubIOp::create(b, end, first), valid};
}

QueryRowSequence mlir::pisa::detail::sequenceOfQueryRow(
    ImplicitLocOpBuilder &b, Value cuQueries, Value cuKeys, Value numQueryRows,
    Value numKeyRows, Value row, Value batchRules) {
  using P = arith::CmpIPredicate;
  Value numSeqs =
      arith::SubIOp::create(b, dimOf(b, cuQueries, 0), indexConst(b, 1));
  Value seq =
      findSequence(b, numSeqs, row, [&](ImplicitLocOpBuilder &lb, Value s) {
        return cuEntry(lb, cuQueries, s);
      });
  PackedKeys keys = packedKeys(b, cuKeys, numKeyRows, seq);
  Value q0 = cuEntry(b, cuQueries, seq);
  Value q1 =
      cuEntry(b, cuQueries, arith::AddIOp::create(b, seq, indexConst(b, 1)));
  Value numQueries = arith::SubIOp::create(b, q1, q0);
  // The batch's rules put the row in [q0, q1) and t in [0, N_b); the
  // sequence's own checks keep every access in bounds on their own.
  Value rules = batchRules ? batchRules
                           : batchRulesHold(b, cuKeys, numKeyRows, cuQueries,
                                            numQueryRows);
  Value valid = arith::AndIOp::create(
      b, arith::AndIOp::create(b, rules, keys.valid),
      arith::AndIOp::create(b,
                            arith::AndIOp::create(b, cmp(b, P::sle, q0, row),
                                                  cmp(b, P::slt, row, q1)),
                            cmp(b, P::sle, numQueries, keys.count)));
  Value position =
      arith::AddIOp::create(b, arith::SubIOp::create(b, keys.count, numQueries),
                            arith::SubIOp::create(b, row, q0));
  return {seq, keys, position, valid};
}

Value mlir::pisa::detail::firstNodeSlot(ImplicitLocOpBuilder &b, Value firstKey,
                                        Value seq, int64_t blockSize,
                                        Value span) {
  Value leaf = arith::DivUIOp::create(b, firstKey, indexConst(b, blockSize));
  return arith::AddIOp::create(b, arith::DivUIOp::create(b, leaf, span), seq);
}
