//===- QueryLists.cpp - Which queries attend each key block ---------------===//
//
// The five kernels before the backward's key kernel
// (AttentionGradKeys.cpp): a stable counting sort of the (query, attended
// block) pairs by block, whose result (a list of queries per key block)
// takes memory linear in N and Nq. The queries are cut into Q chunks; a
// row of the index per key block holds each chunk's count of the block's
// queries, then the chunk's offset in the block's list:
//
//   zero_query_index        a thread per index word
//   count_attending_queries a thread per query: index[row][chunk] += 1,
//                           once a warp per word
//   scan_query_index_rows   a warp per row: counts -> offsets, length
//   scan_query_index_starts a block per batch x KV head: each row's start
//   list_attending_queries  a warp per chunk, its queries in order
//
// The last writes a chunk's queries 32 at a time (a lane each), the
// entries of their selection rows in order: the lanes that attend one
// block (match.sync) take consecutive places from its running offset, so
// a list's order depends only on the selection, never on scheduling. The
// forward's rule decides which entries count (walkAttendedBlocks). A
// packed batch's rows are its block slots (sequence s's blocks from
// floor(cu_k[s] / C) + s).
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
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

using P = arith::CmpIPredicate;

Value mlir::pisa::detail::queryListChunks(ImplicitLocOpBuilder &b,
                                          Value numQueries) {
  Value chunks = arith::CeilDivUIOp::create(b, numQueries,
                                            indexConst(b, kListChunkQueries));
  return arith::MaxUIOp::create(
      b, arith::MinUIOp::create(b, chunks, indexConst(b, kMaxListChunks)),
      indexConst(b, 1));
}

mlir::pisa::detail::QueryIndexColumns::QueryIndexColumns(
    ImplicitLocOpBuilder &b, Value index) {
  chunks = arith::SubIOp::create(b, dimOf(b, index, 3),
                                 indexConst(b, kIndexExtraColumns));
}

Value mlir::pisa::detail::QueryIndexColumns::column(ImplicitLocOpBuilder &b,
                                                    int64_t after) const {
  return arith::AddIOp::create(b, chunks, indexConst(b, after));
}

Value mlir::pisa::detail::QueryIndexColumns::rowStart(ImplicitLocOpBuilder &b,
                                                      Value index,
                                                      ValueRange row) const {
  Type i64 = b.getI64Type();
  auto word = [&](int64_t after) {
    return arith::ExtUIOp::create(
        b, i64,
        memref::LoadOp::create(
            b, index, ValueRange{row[0], row[1], row[2], column(b, after)}));
  };
  return arith::OrIOp::create(
      b, word(1),
      arith::ShLIOp::create(b, word(2),
                            arith::ConstantIntOp::create(b, 32, 64)));
}

namespace {

constexpr int64_t kLanes = 32;
/// Rows the row scan takes a block (a warp each).
constexpr int64_t kScanRowsPerBlock = 4;
/// Threads of the starts' scan, a block per batch x KV head.
constexpr int64_t kStartThreads = 1024;
/// The count kernel's word key holds a chunk in its low 8 bits.
static_assert(kMaxListChunks <= 256, "a chunk must fit 8 bits");

Value i32Const(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantIntOp::create(b, v, 32);
}

/// The index's columns and the queries of a chunk, ceil(Nq / Q).
struct Chunks : QueryIndexColumns {
  Value size;
  Chunks(ImplicitLocOpBuilder &b, Value index, Value numQueries)
      : QueryIndexColumns(b, index) {
    size = arith::CeilDivUIOp::create(b, numQueries, chunks);
  }
};

/// `v` (i32) from lane `from` (i32) of the warp.
Value shuffleIdx(ImplicitLocOpBuilder &b, Value v, Value from) {
  return gpu::ShuffleOp::create(b, v, from, i32Const(b, kLanes),
                                gpu::ShuffleMode::IDX)
      .getShuffleResult();
}

/// An i64 `v` from lane `from`, as two i32 shuffles.
Value shuffleIdx64(ImplicitLocOpBuilder &b, Value v, Value from) {
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  Value lo = shuffleIdx(b, arith::TruncIOp::create(b, i32, v), from);
  Value hi = shuffleIdx(b,
                        arith::TruncIOp::create(
                            b, i32,
                            arith::ShRUIOp::create(
                                b, v, arith::ConstantIntOp::create(b, 32, 64))),
                        from);
  return arith::OrIOp::create(
      b, arith::ExtUIOp::create(b, i64, lo),
      arith::ShLIOp::create(b, arith::ExtUIOp::create(b, i64, hi),
                            arith::ConstantIntOp::create(b, 32, 64)));
}

/// Inclusive prefix sum of `v` (i32 or i64) over the warp's lanes.
Value inclusiveLaneSum(ImplicitLocOpBuilder &b, Value v, Value lane) {
  Value lane32 = toI32(b, lane);
  const bool wide = v.getType().isInteger(64);
  for (int64_t k = 1; k < kLanes; k *= 2) {
    Value from = arith::SubIOp::create(
        b, arith::MaxSIOp::create(b, lane32, i32Const(b, k)), i32Const(b, k));
    Value below = wide ? shuffleIdx64(b, v, from) : shuffleIdx(b, v, from);
    Value has = cmp(b, P::sge, lane32, i32Const(b, k));
    v = arith::AddIOp::create(
        b, v,
        arith::SelectOp::create(b, has, below,
                                arith::ConstantIntOp::create(
                                    b, 0, v.getType().getIntOrFloatBitWidth())
                                    .getResult()));
  }
  return v;
}

/// The block query `query` attends as a row of the index: its selection
/// entry, from the first slot of its sequence in a packed batch.
/// The lanes of a warp whose `use` lanes share `key` (i32 or i64): their
/// mask (match.sync; a lane not in use matches no other, its key -1 -
/// lane), those of them below this lane (`below`: this lane's lower
/// bits), and whether this lane leads them (uses and has none below).
struct LaneGroup {
  Value peers, before, leads;
  LaneGroup(ImplicitLocOpBuilder &b, Value use, Value key, Value lane32,
            Value below) {
    Value alone = arith::SubIOp::create(b, i32Const(b, -1), lane32);
    if (key.getType() != alone.getType())
      alone = arith::ExtSIOp::create(b, key.getType(), alone);
    peers = NVVM::MatchSyncOp::create(
        b, b.getI32Type(), i32Const(b, -1),
        arith::SelectOp::create(b, use, key, alone), NVVM::MatchSyncKind::any);
    before = arith::AndIOp::create(b, peers, below);
    leads =
        arith::AndIOp::create(b, use, cmp(b, P::eq, before, i32Const(b, 0)));
  }
};

struct QueryRows {
  Value numKeys, keyEnd, firstSlot;
  QueryRows(ImplicitLocOpBuilder &b, const Kernel &kernel, Value query,
            int64_t blockSize) {
    // Only the row's own sequence must be sound here (its slots then lie
    // inside the index): the key kernel turns a broken batch into NaN rows
    // whatever the lists say.
    QueryKeys keys =
        queryKeysOf(b, kernel, query,
                    kernel.has("cuSeqlensQ")
                        ? arith::ConstantIntOp::create(b, 1, 1).getResult()
                        : Value());
    numKeys = keys.numKeys;
    keyEnd = arith::MinUIOp::create(
        b, numKeys, arith::AddIOp::create(b, keys.position, indexConst(b, 1)));
    if (keys.firstKey)
      firstSlot = firstNodeSlot(b, keys.firstKey, keys.seq, blockSize,
                                indexConst(b, 1));
  }
  Value row(ImplicitLocOpBuilder &b, Value s32) const {
    Value row = toIndex(b, s32);
    return firstSlot ? arith::AddIOp::create(b, firstSlot, row).getResult()
                     : row;
  }
};

/// zero_query_index: one thread per word of a (batch x KV head)'s rows.
Kernel buildZeroIndex(PatternRewriter &rewriter, Operation *op, Value index) {
  OpBuilder::InsertionGuard guard(rewriter);
  MemRefType type = cast<MemRefType>(index.getType());
  Kernel kernel =
      createKernel(rewriter, op, "zero_query_index", {{"index", type}});
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  const int64_t kvHeads = type.getShape()[1];
  Value indexArg = kernel.arg("index");
  Value words =
      arith::MulIOp::create(b, dimOf(b, indexArg, 2), dimOf(b, indexArg, 3));
  Value i = arith::AddIOp::create(
      b, arith::MulIOp::create(b, blockIdX(b), indexConst(b, kListThreads)),
      threadIdX(b));
  buildIfThen(b, cmp(b, P::ult, i, words), [&](ImplicitLocOpBuilder &wb) {
    Value row = arith::DivUIOp::create(wb, i, dimOf(wb, indexArg, 3));
    Value word = arith::RemUIOp::create(wb, i, dimOf(wb, indexArg, 3));
    ThreadPlace at(wb, kvHeads);
    memref::StoreOp::create(wb, i32Const(wb, 0), indexArg,
                            ValueRange{at.batch, at.kv, row, word});
  });
  gpu::ReturnOp::create(b);
  return kernel;
}

/// count_attending_queries: one thread per (query, batch x KV head) counts
/// 1 at its chunk's column of each row it attends. For each selection entry
/// in turn, the lanes of a warp that count at one (row, chunk) word
/// (match.sync) add their number there once, by the lowest of them: every
/// query of a PISA selection attends block 0, whose words one atomic a
/// lane would contend for.
Kernel buildCountQueries(PatternRewriter &rewriter,
                         SparseAttentionGradKeysKernelOp op, int64_t topK,
                         ArrayRef<KernelOperand> operands) {
  OpBuilder::InsertionGuard guard(rewriter);
  const int64_t kvHeads = bufferType(op.getQueryIndex()).getShape()[1];
  Kernel kernel =
      createKernelFor(rewriter, op, "count_attending_queries", operands);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  Value selection = kernel.arg("selection"), index = kernel.arg("index");
  Type i64 = b.getI64Type();
  Value numQueries = dimOf(b, selection, 2);
  Value tid = threadIdX(b);
  Value query = arith::AddIOp::create(
      b, arith::MulIOp::create(b, blockIdX(b), indexConst(b, kListThreads)),
      tid);
  Value lane32 =
      toI32(b, arith::RemUIOp::create(b, tid, indexConst(b, kLanes)));
  Value below = arith::SubIOp::create(
      b, arith::ShLIOp::create(b, i32Const(b, 1), lane32), i32Const(b, 1));
  ThreadPlace at(b, kvHeads);
  Value batch = at.batch, kv = at.kv;
  Value active = cmp(b, P::ult, query, numQueries);
  // A lane past the queries walks the last query's row and counts
  // nothing: every lane of the warp reaches each match.sync (the grid has
  // no block when Nq = 0).
  Value walked = arith::MinUIOp::create(
      b, query, arith::SubIOp::create(b, numQueries, indexConst(b, 1)));
  Chunks chunks(b, index, numQueries);
  Value chunk = arith::DivUIOp::create(b, walked, chunks.size);
  QueryRows rows(b, kernel, walked, op.getBlockSize());
  walkAttendedBlocks(
      b, selection, {batch, kv, walked}, rows.numKeys, rows.keyEnd,
      op.getBlockSize(), topK,
      [&](ImplicitLocOpBuilder &lb, Value attended, Value s32, Value) {
        Value use = arith::AndIOp::create(lb, attended, active);
        Value row = rows.row(lb, s32);
        // The word's key: the row above the chunk's 8 bits (Q <= 256).
        Value word = arith::OrIOp::create(
            lb,
            arith::ShLIOp::create(lb,
                                  arith::IndexCastUIOp::create(lb, i64, row),
                                  arith::ConstantIntOp::create(lb, 8, 64)),
            arith::IndexCastUIOp::create(lb, i64, chunk));
        LaneGroup group(lb, use, word, lane32, below);
        buildIfThen(lb, group.leads, [&](ImplicitLocOpBuilder &ab) {
          memref::AtomicRMWOp::create(ab, arith::AtomicRMWKind::addi,
                                      math::CtPopOp::create(ab, group.peers),
                                      index, ValueRange{batch, kv, row, chunk});
        });
      });
  gpu::ReturnOp::create(b);
  return kernel;
}

/// scan_query_index_rows: a warp per row turns its chunks' counts into
/// their offsets in the row's list and writes its length at column Q.
Kernel buildScanRows(PatternRewriter &rewriter, Operation *op, Value index) {
  OpBuilder::InsertionGuard guard(rewriter);
  MemRefType type = cast<MemRefType>(index.getType());
  Kernel kernel =
      createKernel(rewriter, op, "scan_query_index_rows", {{"index", type}});
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  const int64_t kvHeads = type.getShape()[1];
  Value indexArg = kernel.arg("index");
  Value tid = threadIdX(b);
  Value lane = arith::RemUIOp::create(b, tid, indexConst(b, kLanes));
  Value row = arith::AddIOp::create(
      b,
      arith::MulIOp::create(b, blockIdX(b), indexConst(b, kScanRowsPerBlock)),
      arith::DivUIOp::create(b, tid, indexConst(b, kLanes)));
  ThreadPlace at(b, kvHeads);
  Value batch = at.batch, kv = at.kv;
  // The count is at most Nq (a query attends a block once): i32.
  buildIfThen(
      b, cmp(b, P::ult, row, dimOf(b, indexArg, 2)),
      [&](ImplicitLocOpBuilder &rb) {
        Value q = QueryIndexColumns(rb, indexArg).chunks;
        Value total = buildLoop(
            rb, indexConst(rb, 0), q, indexConst(rb, kLanes),
            ValueRange{i32Const(rb, 0)},
            [&](ImplicitLocOpBuilder &lb, Value c0,
                ValueRange st) -> SmallVector<Value> {
              Value c = arith::AddIOp::create(lb, c0, lane);
              Value in = cmp(lb, P::ult, c, q);
              Value at = arith::MinUIOp::create(
                  lb, c, arith::SubIOp::create(lb, q, indexConst(lb, 1)));
              Value count = arith::SelectOp::create(
                  lb, in,
                  memref::LoadOp::create(lb, indexArg,
                                         ValueRange{batch, kv, row, at}),
                  i32Const(lb, 0));
              Value upTo = inclusiveLaneSum(lb, count, lane);
              buildIfThen(lb, in, [&](ImplicitLocOpBuilder &sb) {
                memref::StoreOp::create(
                    sb,
                    arith::AddIOp::create(
                        sb, st[0], arith::SubIOp::create(sb, upTo, count)),
                    indexArg, ValueRange{batch, kv, row, c});
              });
              return {arith::AddIOp::create(
                  lb, st[0], shuffleIdx(lb, upTo, i32Const(lb, kLanes - 1)))};
            })[0];
        buildIfThen(rb, cmp(rb, P::eq, lane, indexConst(rb, 0)),
                    [&](ImplicitLocOpBuilder &sb) {
                      memref::StoreOp::create(sb, total, indexArg,
                                              ValueRange{batch, kv, row, q});
                    });
      });
  gpu::ReturnOp::create(b);
  return kernel;
}

/// scan_query_index_starts: a block of kStartThreads per batch x KV head;
/// thread t takes a contiguous run of rows, the runs' sums are scanned over
/// the block (i64: the lists hold up to Nq K entries; each warp's lanes by
/// shuffles, the warps' totals in shared memory by warp 0), and each row
/// gets its start.
Kernel buildScanStarts(PatternRewriter &rewriter, Operation *op, Value index) {
  OpBuilder::InsertionGuard guard(rewriter);
  MemRefType type = cast<MemRefType>(index.getType());
  Type i32 = rewriter.getI32Type(), i64 = rewriter.getI64Type();
  Kernel kernel = createKernel(
      rewriter, op, "scan_query_index_starts", {{"index", type}},
      {workgroupType(rewriter.getContext(), {kStartThreads / kLanes}, i64)});
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  const int64_t kvHeads = type.getShape()[1];
  Value indexArg = kernel.arg("index");
  Value warpSums = kernel.func().getWorkgroupAttributions()[0];
  ThreadPlace at(b, kvHeads);
  Value batch = at.batch, kv = at.kv;
  Value rows = dimOf(b, indexArg, 2);
  Value q = QueryIndexColumns(b, indexArg).chunks;
  Value run = arith::CeilDivUIOp::create(b, rows, indexConst(b, kStartThreads));
  Value begin =
      arith::MinUIOp::create(b, arith::MulIOp::create(b, at.tid, run), rows);
  Value end =
      arith::MinUIOp::create(b, arith::AddIOp::create(b, begin, run), rows);
  auto lengthOf = [&](ImplicitLocOpBuilder &lb, Value row) -> Value {
    return arith::ExtUIOp::create(
        lb, i64,
        memref::LoadOp::create(lb, indexArg, ValueRange{batch, kv, row, q}));
  };
  Value zero64 = arith::ConstantIntOp::create(b, 0, 64);
  Value own =
      buildLoop(b, begin, end, ValueRange{zero64},
                [&](ImplicitLocOpBuilder &lb, Value row,
                    ValueRange st) -> SmallVector<Value> {
                  return {arith::AddIOp::create(lb, st[0], lengthOf(lb, row))};
                })[0];
  Value upTo = inclusiveLaneSum(b, own, at.lane);
  buildIfThen(b, cmp(b, P::eq, at.lane, indexConst(b, kLanes - 1)),
              [&](ImplicitLocOpBuilder &tb) {
                memref::StoreOp::create(tb, upTo, warpSums, at.warp);
              });
  gpu::BarrierOp::create(b);
  // Warp 0 turns the warps' totals into their bases.
  buildIfThen(b, cmp(b, P::eq, at.warp, indexConst(b, 0)),
              [&](ImplicitLocOpBuilder &tb) {
                Value total = memref::LoadOp::create(tb, warpSums, at.lane);
                Value before = arith::SubIOp::create(
                    tb, inclusiveLaneSum(tb, total, at.lane), total);
                memref::StoreOp::create(tb, before, warpSums, at.lane);
              });
  gpu::BarrierOp::create(b);
  Value start =
      arith::AddIOp::create(b, memref::LoadOp::create(b, warpSums, at.warp),
                            arith::SubIOp::create(b, upTo, own));
  buildLoop(b, begin, end, ValueRange{start},
            [&](ImplicitLocOpBuilder &lb, Value row,
                ValueRange st) -> SmallVector<Value> {
              Value lo = arith::TruncIOp::create(lb, i32, st[0]);
              Value hi = arith::TruncIOp::create(
                  lb, i32,
                  arith::ShRUIOp::create(
                      lb, st[0], arith::ConstantIntOp::create(lb, 32, 64)));
              memref::StoreOp::create(
                  lb, lo, indexArg,
                  ValueRange{batch, kv, row,
                             arith::AddIOp::create(lb, q, indexConst(lb, 1))});
              memref::StoreOp::create(
                  lb, hi, indexArg,
                  ValueRange{batch, kv, row,
                             arith::AddIOp::create(lb, q, indexConst(lb, 2))});
              return {arith::AddIOp::create(lb, st[0], lengthOf(lb, row))};
            });
  gpu::ReturnOp::create(b);
  return kernel;
}

/// list_attending_queries: a warp per (chunk, batch x KV head) walks its
/// chunk's queries 32 at a time. For each selection entry in turn, the
/// lanes attending one row (match.sync) take the places from the row's
/// running offset in lane order; the lowest of them moves the offset on.
Kernel buildListQueries(PatternRewriter &rewriter,
                        SparseAttentionGradKeysKernelOp op, int64_t topK,
                        ArrayRef<KernelOperand> operands) {
  OpBuilder::InsertionGuard guard(rewriter);
  const int64_t kvHeads = bufferType(op.getQueryIndex()).getShape()[1];
  Kernel kernel =
      createKernelFor(rewriter, op, "list_attending_queries", operands);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  Value selection = kernel.arg("selection"), index = kernel.arg("index"),
        list = kernel.arg("list");
  Type i64 = b.getI64Type();
  Value numQueries = dimOf(b, selection, 2);
  Value lane = threadIdX(b);
  Value lane32 = toI32(b, lane);
  ThreadPlace at(b, kvHeads);
  Value batch = at.batch, kv = at.kv;
  Chunks chunks(b, index, numQueries);
  Value chunk = blockIdX(b);
  Value first = arith::MinUIOp::create(
      b, arith::MulIOp::create(b, chunk, chunks.size), numQueries);
  Value last = arith::MinUIOp::create(
      b, arith::AddIOp::create(b, first, chunks.size), numQueries);
  Value below = arith::SubIOp::create(
      b, arith::ShLIOp::create(b, i32Const(b, 1), lane32), i32Const(b, 1));
  Value allLanes = i32Const(b, -1);
  buildLoop(
      b, first, last, indexConst(b, kLanes), ValueRange{},
      [&](ImplicitLocOpBuilder &sb, Value q0,
          ValueRange) -> SmallVector<Value> {
        Value query = arith::AddIOp::create(sb, q0, lane);
        Value active = cmp(sb, P::ult, query, last);
        // A lane past the chunk walks its last query's row and lists
        // nothing: every lane reaches each match.sync.
        Value walked = arith::MinUIOp::create(
            sb, query, arith::SubIOp::create(sb, last, indexConst(sb, 1)));
        QueryRows rows(sb, kernel, walked, op.getBlockSize());
        walkAttendedBlocks(
            sb, selection, {batch, kv, walked}, rows.numKeys, rows.keyEnd,
            op.getBlockSize(), topK,
            [&](ImplicitLocOpBuilder &lb, Value attended, Value s32,
                Value rank) {
              Value use = arith::AndIOp::create(lb, attended, active);
              Value row = rows.row(lb, s32);
              LaneGroup group(lb, use, toI32(lb, row), lane32, below);
              Value peers = group.peers, before = group.before,
                    leads = group.leads;
              SmallVector<Value> at{batch, kv, row, chunk};
              Value place = buildIf(
                  lb, leads, TypeRange{i64},
                  [&](ImplicitLocOpBuilder &tb) -> SmallVector<Value> {
                    Value offset = arith::ExtUIOp::create(
                        tb, i64, memref::LoadOp::create(tb, index, at));
                    return {arith::AddIOp::create(
                        tb, chunks.rowStart(tb, index, {batch, kv, row}),
                        offset)};
                  },
                  [&](ImplicitLocOpBuilder &fb) -> SmallVector<Value> {
                    return {arith::ConstantIntOp::create(fb, 0, 64)};
                  })[0];
              Value leader = math::CountTrailingZerosOp::create(lb, peers);
              place = arith::AddIOp::create(
                  lb, shuffleIdx64(lb, place, leader),
                  arith::ExtUIOp::create(lb, i64,
                                         math::CtPopOp::create(lb, before)));
              buildIfThen(lb, use, [&](ImplicitLocOpBuilder &ub) {
                Value flat =
                    arith::IndexCastUIOp::create(ub, ub.getIndexType(), place);
                // With dS tiles the entry also holds the block's rank
                // among the query's attended blocks (where its tile goes).
                Value entry = op.getScores()
                                  ? arith::AddIOp::create(
                                        ub,
                                        arith::MulIOp::create(
                                            ub, query, indexConst(ub, topK)),
                                        rank)
                                  : query;
                memref::StoreOp::create(
                    ub, toI32(ub, entry), list,
                    ValueRange{
                        batch, kv,
                        arith::DivUIOp::create(ub, flat, indexConst(ub, topK)),
                        arith::RemUIOp::create(ub, flat,
                                               indexConst(ub, topK))});
              });
              buildIfThen(lb, leads, [&](ImplicitLocOpBuilder &ub) {
                Value offset = memref::LoadOp::create(ub, index, at);
                memref::StoreOp::create(
                    ub,
                    arith::AddIOp::create(ub, offset,
                                          math::CtPopOp::create(ub, peers)),
                    index, at);
              });
              // The leader's new offset is visible to the lane that leads
              // this row at a later entry.
              NVVM::SyncWarpOp::create(lb, allLanes);
            });
        return {};
      });
  gpu::ReturnOp::create(b);
  return kernel;
}

} // namespace

void mlir::pisa::detail::launchQueryLists(PatternRewriter &rewriter,
                                          ImplicitLocOpBuilder &host,
                                          SparseAttentionGradKeysKernelOp op,
                                          int64_t topK,
                                          ArrayRef<KernelOperand> operands) {
  Value index = op.getQueryIndex();
  const int64_t kvHeads = bufferType(index).getShape()[1];
  Kernel zero = buildZeroIndex(rewriter, op, index);
  Kernel count = buildCountQueries(rewriter, op, topK, operands);
  Kernel rows = buildScanRows(rewriter, op, index);
  Kernel starts = buildScanStarts(rewriter, op, index);
  Kernel lists = buildListQueries(rewriter, op, topK, operands);
  Value groups = arith::MulIOp::create(host, dimOf(host, index, 0),
                                       indexConst(host, kvHeads));
  Value numRows = dimOf(host, index, 2);
  Value words = arith::MulIOp::create(host, numRows, dimOf(host, index, 3));
  Value numQueries = dimOf(host, op.getSelection(), 2);
  launch(host, zero,
         host.createOrFold<arith::CeilDivUIOp>(words,
                                               indexConst(host, kListThreads)),
         groups, kListThreads, {{"index", index}});
  launch(host, count,
         host.createOrFold<arith::CeilDivUIOp>(numQueries,
                                               indexConst(host, kListThreads)),
         groups, kListThreads, operands);
  launch(host, rows,
         host.createOrFold<arith::CeilDivUIOp>(
             numRows, indexConst(host, kScanRowsPerBlock)),
         groups, kScanRowsPerBlock * kLanes, {{"index", index}});
  launch(host, starts, indexConst(host, 1), groups, kStartThreads,
         {{"index", index}});
  launch(host, lists,
         arith::SubIOp::create(host, dimOf(host, index, 3),
                               indexConst(host, kIndexExtraColumns)),
         groups, kLanes, operands);
}
