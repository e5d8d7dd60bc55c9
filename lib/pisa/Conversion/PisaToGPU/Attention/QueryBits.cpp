//===- QueryBits.cpp - Which queries attend each key block ----------------===//
//
// The two kernels before the backward's key kernel
// (AttentionGradKeys.cpp): one zeroes the query bits, one sets bit i of
// every key block query i attends (the forward's rule for which selection
// entries count). A packed batch's rows are its block slots (sequence s's
// blocks from floor(cu_k[s] / C) + s).
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionGrad.h"
#include "Attention/SparseAttention.h"
#include "Kernels/KernelBuilder.h"
#include "Selection/PackedSequences.h"
#include "Selection/QueryKernels.h"

#include "../Common/LoopBuilders.h"

#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

using P = arith::CmpIPredicate;

/// The kernel that zeroes the query bits: one thread per word of a (batch
/// x KV head)'s rows.
Kernel mlir::pisa::detail::buildZeroBits(PatternRewriter &rewriter,
                                         Operation *op, Value bits) {
  OpBuilder::InsertionGuard guard(rewriter);
  MemRefType type = cast<MemRefType>(bits.getType());
  Kernel kernel =
      createKernel(rewriter, op, "zero_query_bits", {{"bits", type}});
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  const int64_t kvHeads = type.getShape()[1];
  Value bitsArg = kernel.arg("bits");
  Value words =
      arith::MulIOp::create(b, dimOf(b, bitsArg, 2), dimOf(b, bitsArg, 3));
  Value at = arith::AddIOp::create(
      b, arith::MulIOp::create(b, blockIdX(b), indexConst(b, kMarkThreads)),
      threadIdX(b));
  buildIfThen(b, cmp(b, P::ult, at, words), [&](ImplicitLocOpBuilder &wb) {
    Value row = arith::DivUIOp::create(wb, at, dimOf(wb, bitsArg, 3));
    Value word = arith::RemUIOp::create(wb, at, dimOf(wb, bitsArg, 3));
    memref::StoreOp::create(
        wb, arith::ConstantIntOp::create(wb, 0, 32), bitsArg,
        ValueRange{
            arith::DivUIOp::create(wb, blockIdY(wb), indexConst(wb, kvHeads)),
            arith::RemUIOp::create(wb, blockIdY(wb), indexConst(wb, kvHeads)),
            row, word});
  });
  gpu::ReturnOp::create(b);
  return kernel;
}

/// The kernel that sets bit i of every block query i attends: one thread
/// per (query, batch x KV head), the forward's rule for which entries
/// count.
Kernel mlir::pisa::detail::buildMarkQueries(PatternRewriter &rewriter,
                                            SparseAttentionGradKeysKernelOp op,
                                            int64_t topK,
                                            ArrayRef<KernelOperand> operands) {
  OpBuilder::InsertionGuard guard(rewriter);
  MemRefType bitsType = bufferType(op.getQueryBits());
  Kernel kernel =
      createKernelFor(rewriter, op, "mark_attending_queries", operands);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  const int64_t kvHeads = bitsType.getShape()[1];
  Value selection = kernel.arg("selection"), bits = kernel.arg("bits");
  Value query = arith::AddIOp::create(
      b, arith::MulIOp::create(b, blockIdX(b), indexConst(b, kMarkThreads)),
      threadIdX(b));
  Value batch = arith::DivUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
  Value kv = arith::RemUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
  buildIfThen(
      b, cmp(b, P::ult, query, dimOf(b, selection, 2)),
      [&](ImplicitLocOpBuilder &qb) {
        // Only the row's own sequence must be sound here (its slots then
        // lie inside the bits): the other kernels turn a broken batch into
        // NaN rows whatever the bits say.
        QueryKeys keys =
            queryKeysOf(qb, kernel, query,
                        kernel.has("cuSeqlensQ")
                            ? arith::ConstantIntOp::create(qb, 1, 1).getResult()
                            : Value());
        Value numKeys = keys.numKeys;
        Value keyEnd = arith::MinUIOp::create(
            qb, numKeys,
            arith::AddIOp::create(qb, keys.position, indexConst(qb, 1)));
        // A packed batch's rows are its block slots (the key kernel's).
        Value firstSlot;
        if (keys.firstKey)
          firstSlot = firstNodeSlot(qb, keys.firstKey, keys.seq,
                                    op.getBlockSize(), indexConst(qb, 1));
        Value word = arith::DivUIOp::create(qb, query, indexConst(qb, 32));
        Value mask = arith::ShLIOp::create(
            qb, arith::ConstantIntOp::create(qb, 1, 32),
            toI32(qb, arith::RemUIOp::create(qb, query, indexConst(qb, 32))));
        walkAttendedBlocks(
            qb, selection, {batch, kv, query}, numKeys, keyEnd,
            op.getBlockSize(), topK,
            [&](ImplicitLocOpBuilder &lb, Value attended, Value s32, Value) {
              buildIfThen(lb, attended, [&](ImplicitLocOpBuilder &ab) {
                Value row = toIndex(ab, s32);
                if (firstSlot)
                  row = arith::AddIOp::create(ab, firstSlot, row);
                memref::AtomicRMWOp::create(ab, arith::AtomicRMWKind::ori, mask,
                                            bits,
                                            ValueRange{batch, kv, row, word});
              });
            });
      });
  gpu::ReturnOp::create(b);
  return kernel;
}
