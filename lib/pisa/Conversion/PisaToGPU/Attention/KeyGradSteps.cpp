//===- KeyGradSteps.cpp - The key kernel's walk and steps -----------------===//
//
// KeyGradBlock's walk over the queries of its segment (a run of the
// block's list, a window at a time into a list in shared memory) and its
// steps over them: staged (S, dP, P^T and dS^T
// through shared memory, warps split dv and d) or in registers (each warp
// owns 16 keys, the products transposed so that the keys are the mma rows,
// dK and dV in the lanes' registers), the products on mma.sync or, on
// sm_90a, on the warpgroup (wgmma). KeyGradBlock.h.
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionGrad.h"
#include "Attention/AttentionSteps.h"
#include "Attention/KeyGradBlock.h"
#include "Attention/SparseAttention.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/RowSoftmax.h"
#include "Kernels/WarpMma.h"
#include "Kernels/WarpgroupMma.h"
#include "Selection/PackedSequences.h"
#include "Selection/QueryKernels.h"

#include "../Common/LoopBuilders.h"

#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

using P = arith::CmpIPredicate;

SmallVector<Value> KeyGradBlock::forEachBatch(ImplicitLocOpBuilder &b,
                                              ValueRange init, BatchFn batch) {
  const int64_t tokens = p.rows.tokens;
  SmallVector<Value> start(init.begin(), init.end());
  start.push_back(indexConst(b, 0));
  SmallVector<Value> out = buildLoop(
      b, segmentBegin, segmentEnd, indexConst(b, kListWindow), start,
      [&](ImplicitLocOpBuilder &lb, Value w0,
          ValueRange st) -> SmallVector<Value> {
        Value pending = st.back();
        gpu::BarrierOp::create(lb); // the list's front and count are read
        appendWindow(lb, w0, pending);
        gpu::BarrierOp::create(lb);
        Value count = toIndex(
            lb, memref::LoadOp::create(lb, listCount, indexConst(lb, 0)));
        Value ready =
            cmp(lb, P::uge, count, indexConst(lb, p.stepsAhead * tokens));
        SmallVector<Value> kept(st.begin(), st.end());
        kept.back() = count;
        return buildIf(
            lb, ready, ValueRange(kept).getTypes(),
            [&](ImplicitLocOpBuilder &rb) -> SmallVector<Value> {
              Value full =
                  arith::DivUIOp::create(rb, count, indexConst(rb, tokens));
              SmallVector<Value> state =
                  batch(rb, full, indexConst(rb, tokens), st.drop_back());
              Value used =
                  arith::MulIOp::create(rb, full, indexConst(rb, tokens));
              Value rest = arith::SubIOp::create(rb, count, used);
              Value from = arith::MinUIOp::create(
                  rb, arith::AddIOp::create(rb, used, tid),
                  indexConst(rb, p.listCapacity - 1));
              Value query = memref::LoadOp::create(rb, list, from);
              gpu::BarrierOp::create(rb); // every thread has read its query
              buildIfThen(rb, cmp(rb, P::ult, tid, rest),
                          [&](ImplicitLocOpBuilder &wb) {
                            memref::StoreOp::create(wb, query, list, tid);
                          });
              state.push_back(rest);
              return state;
            },
            [&](ImplicitLocOpBuilder &) { return kept; });
      });
  Value pending = out.back();
  out.pop_back();
  return buildIf(
      b, cmp(b, P::ugt, pending, indexConst(b, 0)), ValueRange(out).getTypes(),
      [&](ImplicitLocOpBuilder &tb) {
        gpu::BarrierOp::create(tb); // the list's front is written
        Value steps =
            arith::CeilDivUIOp::create(tb, pending, indexConst(tb, tokens));
        Value last = arith::SubIOp::create(
            tb, pending,
            arith::MulIOp::create(
                tb, arith::SubIOp::create(tb, steps, indexConst(tb, 1)),
                indexConst(tb, tokens)));
        return batch(tb, steps, last, out);
      },
      [&](ImplicitLocOpBuilder &) { return out; });
}

Value KeyGradBlock::stepQueries(ImplicitLocOpBuilder &b, Value s, Value steps,
                                Value last) const {
  return arith::SelectOp::create(
      b, cmp(b, P::eq, arith::AddIOp::create(b, s, indexConst(b, 1)), steps),
      last, indexConst(b, p.rows.tokens));
}

SmallVector<Value> KeyGradBlock::forEachStep(ImplicitLocOpBuilder &b,
                                             ValueRange init, StepFn step) {
  const int64_t tokens = p.rows.tokens;
  return forEachBatch(
      b, init,
      [&](ImplicitLocOpBuilder &bb, Value steps, Value last,
          ValueRange st) -> SmallVector<Value> {
        return buildLoop(
            bb, indexConst(bb, 0), steps, st,
            [&](ImplicitLocOpBuilder &sb, Value s, ValueRange inner) {
              return step(sb,
                          arith::MulIOp::create(sb, s, indexConst(sb, tokens)),
                          stepQueries(sb, s, steps, last), inner);
            });
      });
}

void KeyGradBlock::appendWindow(ImplicitLocOpBuilder &b, Value w0,
                                Value pending) {
  Value n = arith::MinUIOp::create(b, arith::SubIOp::create(b, segmentEnd, w0),
                                   indexConst(b, kListWindow));
  buildIfThen(b, cmp(b, P::ult, tid, n), [&](ImplicitLocOpBuilder &tb) {
    Value at = arith::AddIOp::create(tb, listStart,
                                     arith::AddIOp::create(tb, w0, tid));
    Value query = memref::LoadOp::create(
        tb, e.arg("queryList"),
        ValueRange{batch, kv,
                   arith::DivUIOp::create(tb, at, indexConst(tb, topK())),
                   arith::RemUIOp::create(tb, at, indexConst(tb, topK()))});
    memref::StoreOp::create(
        tb, query, list,
        ValueRange{arith::AddIOp::create(tb, pending, tid).getResult()});
  });
  buildIfThen(b, cmp(b, P::eq, tid, indexConst(b, 0)),
              [&](ImplicitLocOpBuilder &tb) {
                memref::StoreOp::create(
                    tb, toI32(tb, arith::AddIOp::create(tb, pending, n)),
                    listCount, indexConst(tb, 0));
              });
}

Value KeyGradBlock::slotEntry(ImplicitLocOpBuilder &b, Value first,
                              Value slot) {
  Value at = arith::MinUIOp::create(b, arith::AddIOp::create(b, first, slot),
                                    indexConst(b, p.listCapacity - 1));
  return toIndex(b, memref::LoadOp::create(b, list, at));
}

Value KeyGradBlock::slotQuery(ImplicitLocOpBuilder &b, Value first, Value slot,
                              Value n) {
  Value q = slotEntry(b, first, slot);
  if (p.scores)
    q = arith::DivUIOp::create(b, q, indexConst(b, topK()));
  return arith::SelectOp::create(b, holds(b, slot, n), q, indexConst(b, 0));
}

Value KeyGradBlock::slotRank(ImplicitLocOpBuilder &b, Value first, Value slot) {
  return arith::RemUIOp::create(b, slotEntry(b, first, slot),
                                indexConst(b, topK()));
}

void KeyGradBlock::stageStepRows(ImplicitLocOpBuilder &b, Value first,
                                 Value n) {
  const int64_t R = p.rows.rows;
  auto token = [&](ImplicitLocOpBuilder &lb, Value slot) {
    return slotQuery(lb, first, slot, n);
  };
  auto holdsOne = [&](ImplicitLocOpBuilder &lb, Value slot) {
    return holds(lb, slot, n);
  };
  stageHeadRows(b,
                {e.arg("queries"), batch, firstHead, G, p.rows.rowsPerToken,
                 token, holdsOne},
                R, p.headDim, qTile, tid, kGradThreads);
  stageHeadRows(b,
                {e.arg("gradOutput"), batch, firstHead, G, p.rows.rowsPerToken,
                 token, holdsOne},
                R, p.valueDim, doTile, tid, kGradThreads);
}

void KeyGradBlock::stagedStep(ImplicitLocOpBuilder &b, const RowSite &site,
                              Value first, Value n) {
  const int64_t R = p.rows.rows, c = p.blockSize;
  Type f32 = b.getF32Type();
  stageStepRows(b, first, n);
  Value query = slotQuery(b, first, site.slot, n);
  Value isHead = arith::AndIOp::create(b, site.isHead, holds(b, site.slot, n));
  Value lse = memref::LoadOp::create(b, e.arg("lse"),
                                     ValueRange{batch, site.head, query});
  Value delta = memref::LoadOp::create(b, e.arg("delta"),
                                       ValueRange{batch, site.head, query});
  Value shift = probabilityShift(b, lse, isHead);
  gpu::BarrierOp::create(b);
  warpSplitRowsProduct(b, qTile, R, p.headDim, kTile, c, sTile, warp,
                       kGradWarps);
  warpSplitRowsProduct(b, doTile, R, p.valueDim, vTile, c, dpTile, warp,
                       kGradWarps);
  gpu::BarrierOp::create(b);
  const int64_t cols = p.rows.columns(c);
  Value col0 = site.firstColumn(b, cols);
  Value keyEnd = keyEndOf(b, query);
  Value visible = arith::SubIOp::create(
      b, arith::SubIOp::create(b, keyEnd, firstKey), col0);
  auto [probs, grads] =
      probabilityAndGradient(b, loadRow(b, sTile, {site.row, col0}, cols, f32),
                             loadRow(b, dpTile, {site.row, col0}, cols, f32),
                             visible, shift, delta, scale, cols);
  storeTransposed(b, probs, pT, col0, site.row);
  storeTransposed(b, grads, dsT, col0, site.row);
  gpu::BarrierOp::create(b);
  warpSplitColumnsAccumulate(b, pT, c, R, doTile, p.valueDim, dvTile, warp,
                             kGradWarps, 64 * 32);
  warpSplitColumnsAccumulate(b, dsT, c, R, qTile, p.headDim, dkTile, warp,
                             kGradWarps, 64 * 32);
  gpu::BarrierOp::create(b); // the tiles are read before the next gather
}

void KeyGradBlock::storeTransposed(ImplicitLocOpBuilder &b, Value values,
                                   Value tile, Value col0, Value row) {
  const int64_t n = cast<VectorType>(values.getType()).getNumElements();
  Value narrow = arith::TruncFOp::create(b, VectorType::get({n}, elem), values);
  for (int64_t x = 0; x < n; ++x)
    memref::StoreOp::create(
        b, vector::ExtractOp::create(b, narrow, x), tile,
        ValueRange{arith::AddIOp::create(b, col0, indexConst(b, x)), row});
}

// The register key kernel. Warp w owns keys [16 (w mod C/16), +16) of the
// block and the step rows of row group w div (C/16): chunks of 16 rows
// i, i + groups, ... (groups = 64 / C). Per chunk, transposed so that the
// keys are the m16 rows: S^T = K Q^T and dP^T = V dO^T (B fragments of
// the row tiles by ldmatrix), P^T and dS^T in the accumulators, rounded
// into A fragments in place, dV += P^T dO and dK += dS^T Q (dO and Q by
// ldmatrix.trans) into the lane's sums: n8 tiles of d, then of dv.

SmallVector<Value> KeyGradBlock::zeroSums(ImplicitLocOpBuilder &b) {
  auto accType = VectorType::get({2, 2}, b.getF32Type());
  Value zero = arith::ConstantOp::create(b, accType, b.getZeroAttr(accType));
  return SmallVector<Value>((p.headDim + p.valueDim) / kMmaCols, zero);
}

namespace {
/// Element `at` of a strided memref as element `linear` of a 1-D view of
/// its buffer: cp.async asks for a unit-stride minor dimension, which a
/// token-major or packed lse ([.., T, Hq] seen as [.., Hq, T]) does not
/// have.
std::pair<Value, Value> flatElement(ImplicitLocOpBuilder &b, Value source,
                                    ArrayRef<Value> at) {
  auto meta = memref::ExtractStridedMetadataOp::create(b, source);
  Value linear = stridedBufferIndex(b, meta.getOffset(), meta.getStrides(), at);
  auto type = cast<MemRefType>(source.getType());
  auto flatType =
      MemRefType::get({ShapedType::kDynamic}, type.getElementType(),
                      MemRefLayoutAttrInterface(), type.getMemorySpace());
  Value size = arith::AddIOp::create(b, linear, indexConst(b, 1));
  Value flat = memref::ReinterpretCastOp::create(
      b, flatType, meta.getBaseBuffer(), OpFoldResult(b.getIndexAttr(0)),
      ArrayRef<OpFoldResult>{size}, ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  return {flat, linear};
}
} // namespace

KeyGradBlock::StepTiles KeyGradBlock::stepTiles(ImplicitLocOpBuilder &b,
                                                Value parity) const {
  const int64_t R = p.rows.rows;
  Value even = cmp(b, P::eq, parity, indexConst(b, 0));
  // One view at a selected offset, not a memref chosen by scf.if (a
  // workgroup memref block argument the NVVM lowering does not convert).
  auto at = [&](int64_t first, int64_t second, ArrayRef<int64_t> shape,
                Type type) {
    return shared->viewAt(b,
                          arith::SelectOp::create(b, even, indexConst(b, first),
                                                  indexConst(b, second)),
                          shape, type);
  };
  Type f32 = b.getF32Type();
  auto rows = [&](int64_t width) -> SmallVector<int64_t> {
    if (p.warpgroup)
      return swizzledShape(R, width);
    return {R, width + 8};
  };
  StepTiles tiles{at(p.query, p.queryNext, rows(p.headDim), elem),
                  at(p.gradOut, p.gradOutNext, rows(p.valueDim), elem),
                  at(p.rowLse[0], p.rowLse[1], {R}, f32),
                  at(p.rowDelta[0], p.rowDelta[1], {R}, f32),
                  at(p.rowVisible[0], p.rowVisible[1], {R}, b.getI32Type()),
                  Value(),
                  Value()};
  if (p.scores) {
    tiles.scoreQuery = at(p.rowQuery[0], p.rowQuery[1], {R}, b.getI32Type());
    tiles.scoreColumn = at(p.rowColumn[0], p.rowColumn[1], {R}, b.getI32Type());
  }
  return tiles;
}

void KeyGradBlock::issueStep(ImplicitLocOpBuilder &b, Value first, Value n,
                             Value parity) {
  const int64_t R = p.rows.rows, perToken = p.rows.rowsPerToken;
  StepTiles to = stepTiles(b, parity);
  auto token = [&](ImplicitLocOpBuilder &lb, Value slot) {
    return slotQuery(lb, first, slot, n);
  };
  auto holdsOne = [&](ImplicitLocOpBuilder &lb, Value slot) {
    return holds(lb, slot, n);
  };
  copyHeadRowsAsync(
      b, {e.arg("queries"), batch, firstHead, G, perToken, token, holdsOne}, R,
      p.headDim, to.query, tid, kGradThreads);
  copyHeadRowsAsync(
      b, {e.arg("gradOutput"), batch, firstHead, G, perToken, token, holdsOne},
      R, p.valueDim, to.gradOut, tid, kGradThreads);
  buildIfThen(
      b, cmp(b, P::ult, tid, indexConst(b, R)), [&](ImplicitLocOpBuilder &rb) {
        Value slot = arith::DivUIOp::create(rb, tid, indexConst(rb, perToken));
        Value h = arith::RemUIOp::create(rb, tid, indexConst(rb, perToken));
        Value query = slotQuery(rb, first, slot, n);
        Value head = arith::AddIOp::create(
            rb, firstHead,
            arith::MinUIOp::create(rb, h, indexConst(rb, G - 1)));
        Value isHead = arith::AndIOp::create(
            rb, cmp(rb, P::ult, h, indexConst(rb, G)), holds(rb, slot, n));
        // A row without a query or head reads nothing: lse and D are 0
        // there and it sees no key, so its P and dS are 0.
        Value elements = arith::SelectOp::create(rb, isHead, indexConst(rb, 1),
                                                 indexConst(rb, 0));
        for (auto [source, tile] : {std::pair<StringRef, Value>{"lse", to.lse},
                                    {"delta", to.delta}}) {
          auto [flat, at] =
              flatElement(rb, e.arg(source), {batch, head, query});
          nvgpu::DeviceAsyncCopyOp::create(rb, tile, ValueRange{tid}, flat,
                                           ValueRange{at}, rb.getIndexAttr(1),
                                           elements, UnitAttr());
        }
        Value keyEnd = keyEndOf(rb, query);
        Value visible = arith::SelectOp::create(
            rb,
            arith::AndIOp::create(rb, isHead,
                                  cmp(rb, P::ugt, keyEnd, firstKey)),
            arith::MinUIOp::create(rb,
                                   arith::SubIOp::create(rb, keyEnd, firstKey),
                                   indexConst(rb, p.blockSize)),
            indexConst(rb, 0));
        memref::StoreOp::create(rb, toI32(rb, visible), to.visible, tid);
        if (p.scores) {
          // The row's tile row in `scores`: [rank G + h] of its query's.
          Value column = arith::MulIOp::create(
              rb,
              arith::AddIOp::create(
                  rb,
                  arith::MulIOp::create(rb, slotRank(rb, first, slot),
                                        indexConst(rb, G)),
                  arith::MinUIOp::create(rb, h, indexConst(rb, G - 1))),
              indexConst(rb, p.blockSize));
          memref::StoreOp::create(rb, toI32(rb, query), to.scoreQuery, tid);
          memref::StoreOp::create(
              rb,
              arith::SelectOp::create(rb, isHead, toI32(rb, column),
                                      arith::ConstantIntOp::create(rb, -1, 32)),
              to.scoreColumn, tid);
        }
      });
  nvgpu::DeviceAsyncCreateGroupOp::create(
      b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), ValueRange{});
}

void KeyGradBlock::prefetchStep(ImplicitLocOpBuilder &b, Value first, Value n) {
  const int64_t R = p.rows.rows, perToken = p.rows.rowsPerToken;
  auto token = [&](ImplicitLocOpBuilder &lb, Value slot) {
    return slotQuery(lb, first, slot, n);
  };
  auto holdsOne = [&](ImplicitLocOpBuilder &lb, Value slot) {
    return holds(lb, slot, n);
  };
  Value upper = cmp(b, P::uge, tid, indexConst(b, kGradThreads / 2));
  Value rowTid = arith::SubIOp::create(
      b, tid,
      arith::SelectOp::create(b, upper, indexConst(b, kGradThreads / 2),
                              indexConst(b, 0)));
  buildIf(
      b, upper, TypeRange{},
      [&](ImplicitLocOpBuilder &ub) {
        prefetchHeadRowsL2(ub,
                           {e.arg("gradOutput"), batch, firstHead, G, perToken,
                            token, holdsOne},
                           R, p.valueDim, rowTid, kGradThreads / 2);
        return SmallVector<Value>{};
      },
      [&](ImplicitLocOpBuilder &lb) {
        prefetchHeadRowsL2(
            lb,
            {e.arg("queries"), batch, firstHead, G, perToken, token, holdsOne},
            R, p.headDim, rowTid, kGradThreads / 2);
        return SmallVector<Value>{};
      });
}

SmallVector<Value> KeyGradBlock::registerBatch(ImplicitLocOpBuilder &b,
                                               Value steps, Value last,
                                               ValueRange sums) {
  const int64_t tokens = p.rows.tokens;
  Value one = indexConst(b, 1), two = indexConst(b, 2);
  issueStep(b, indexConst(b, 0), stepQueries(b, indexConst(b, 0), steps, last),
            indexConst(b, 0));
  Value slab = arith::RemUIOp::create(b, warp, indexConst(b, slabs()));
  Value group = arith::DivUIOp::create(b, warp, indexConst(b, slabs()));
  Value key0 = arith::MulIOp::create(b, slab, indexConst(b, kMmaRows));
  const int64_t chunks = p.rows.rows / kMmaK / rowGroups();
  return buildLoop(
      b, indexConst(b, 0), steps, sums,
      [&](ImplicitLocOpBuilder &lb, Value s,
          ValueRange acc) -> SmallVector<Value> {
        Value parity = arith::RemUIOp::create(lb, s, two);
        Value next = arith::AddIOp::create(lb, s, one);
        // Step s + 1's copies go to the other buffer, which step s - 1
        // finished reading before the barrier that ended it; then step s's
        // (every group but the last kStepCopyGroups) must have landed.
        buildIf(
            lb, cmp(lb, P::ult, next, steps), TypeRange{},
            [&](ImplicitLocOpBuilder &nb) {
              issueStep(nb,
                        arith::MulIOp::create(nb, next, indexConst(nb, tokens)),
                        stepQueries(nb, next, steps, last),
                        arith::SubIOp::create(nb, one, parity));
              if (int64_t ahead = p.prefetchSteps; ahead > 1) {
                Value later =
                    arith::AddIOp::create(nb, s, indexConst(nb, ahead));
                buildIfThen(nb, cmp(nb, P::ult, later, steps),
                            [&](ImplicitLocOpBuilder &pb) {
                              prefetchStep(
                                  pb,
                                  arith::MulIOp::create(pb, later,
                                                        indexConst(pb, tokens)),
                                  stepQueries(pb, later, steps, last));
                            });
              }
              NVVM::CpAsyncWaitGroupOp::create(nb, kStepCopyGroups);
              return SmallVector<Value>{};
            },
            [&](ImplicitLocOpBuilder &wb) {
              NVVM::CpAsyncWaitGroupOp::create(wb, 0);
              return SmallVector<Value>{};
            });
        if (p.warpgroup)
          fenceSharedToTensorCores(lb);
        gpu::BarrierOp::create(lb); // every thread's copies of step s landed
        StepTiles step = stepTiles(lb, parity);
        SmallVector<Value> out(acc.begin(), acc.end());
        if (p.warpgroup) {
          warpgroupStep(lb, step, parity, out);
          gpu::BarrierOp::create(lb); // the buffer is read before its refill
          return out;
        }
        for (int64_t i = 0; i < chunks; ++i) {
          Value row0 = arith::MulIOp::create(
              lb,
              arith::AddIOp::create(lb, group, indexConst(lb, i * rowGroups())),
              indexConst(lb, kMmaK));
          chunk(lb, step, key0, row0, out);
        }
        gpu::BarrierOp::create(lb); // the buffer is read before its refill
        return out;
      });
}

void KeyGradBlock::chunk(ImplicitLocOpBuilder &b, const StepTiles &step,
                         Value key0, Value row0, SmallVector<Value> &sums) {
  WarpFragments frags{lane, elem};
  SmallVector<Value> s =
      frags.productNT(b, kTile, key0, step.query, row0, p.headDim, 2);
  SmallVector<Value> dp =
      frags.productNT(b, vTile, key0, step.gradOut, row0, p.valueDim, 2);
  auto [probs, grads] = probabilities(b, step, key0, row0, s, dp);
  if (p.scores)
    storeScores(b, step, key0, row0, grads);
  Value pA = frags.accumulatorsAsA(b, probs);
  Value dsA = frags.accumulatorsAsA(b, grads);
  const int64_t kTiles = p.headDim / kMmaCols;
  for (int64_t t = 0; t < kTiles; ++t)
    sums[t] =
        frags.accumulateKN(b, dsA, step.query, row0, t * kMmaCols, sums[t]);
  for (int64_t t = 0; t < p.valueDim / kMmaCols; ++t)
    sums[kTiles + t] = frags.accumulateKN(b, pA, step.gradOut, row0,
                                          t * kMmaCols, sums[kTiles + t]);
}

std::pair<SmallVector<SmallVector<Value>>, SmallVector<SmallVector<Value>>>
KeyGradBlock::probabilities(ImplicitLocOpBuilder &b, const StepTiles &step,
                            Value key0, Value row0, ArrayRef<Value> s,
                            ArrayRef<Value> dp) {
  const float inf = std::numeric_limits<float>::infinity();
  const int64_t tiles = s.size();
  Value gid = arith::DivUIOp::create(b, lane, indexConst(b, 4));
  Value tig = arith::RemUIOp::create(b, lane, indexConst(b, 4));
  Value keyRow = toI32(b, arith::AddIOp::create(b, key0, gid));
  Value logScale = f32Const(b, scale * kLog2E);
  Value negInf = f32Const(b, -inf);
  // probs[t][half * 2 + j]: key key0 + gid + 8 half, row row0 + 8 t + 2
  // tig + j.
  SmallVector<SmallVector<Value>> probs(tiles), grads(tiles);
  for (int64_t t = 0; t < tiles; ++t) {
    Value r = tileRow(b, row0, tig, t);
    Value lse = loadRow(b, step.lse, {r}, 2, b.getF32Type());
    Value delta =
        dp.empty() ? Value() : loadRow(b, step.delta, {r}, 2, b.getF32Type());
    Value visible = loadRow(b, step.visible, {r}, 2, b.getI32Type());
    for (int64_t half = 0; half < 2; ++half) {
      Value key = arith::AddIOp::create(
          b, keyRow, arith::ConstantIntOp::create(b, 8 * half, 32));
      for (int64_t j = 0; j < 2; ++j) {
        SmallVector<int64_t> at{half, j};
        Value seen = arith::CmpIOp::create(
            b, P::slt, key, vector::ExtractOp::create(b, visible, j));
        Value logit = maskedLogit(b, vector::ExtractOp::create(b, s[t], at),
                                  seen, logScale, negInf);
        // A row with a query and head: lse log2 e (+inf where its query
        // saw no key); the others see no key and read lse 0.
        Value prob = shiftedExp2(
            b, logit,
            probabilityShift(b, vector::ExtractOp::create(b, lse, j)));
        probs[t].push_back(prob);
        if (!dp.empty())
          grads[t].push_back(gradient(
              b, prob, vector::ExtractOp::create(b, dp[t], at), delta, j));
      }
    }
  }
  return {std::move(probs), std::move(grads)};
}

Value KeyGradBlock::tileRow(ImplicitLocOpBuilder &b, Value row0, Value tig,
                            int64_t t) {
  return arith::AddIOp::create(
      b, arith::AddIOp::create(b, row0, indexConst(b, 8 * t)),
      arith::MulIOp::create(b, tig, indexConst(b, 2)));
}

Value KeyGradBlock::gradient(ImplicitLocOpBuilder &b, Value prob, Value dp,
                             Value delta, int64_t j) {
  return arith::MulFOp::create(
      b, prob,
      arith::SubFOp::create(b, dp, vector::ExtractOp::create(b, delta, j)));
}

SmallVector<SmallVector<Value>>
KeyGradBlock::gradients(ImplicitLocOpBuilder &b, const StepTiles &step,
                        Value row0, ArrayRef<SmallVector<Value>> probs,
                        ArrayRef<Value> dp) {
  Value tig = arith::RemUIOp::create(b, lane, indexConst(b, 4));
  SmallVector<SmallVector<Value>> grads(probs.size());
  for (auto [t, tileProbs] : llvm::enumerate(probs)) {
    Value r = tileRow(b, row0, tig, t);
    Value delta = loadRow(b, step.delta, {r}, 2, b.getF32Type());
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t j = 0; j < 2; ++j)
        grads[t].push_back(gradient(
            b, tileProbs[half * 2 + j],
            vector::ExtractOp::create(b, dp[t], ArrayRef<int64_t>{half, j}),
            delta, j));
  }
  return grads;
}

void KeyGradBlock::warpgroupStep(ImplicitLocOpBuilder &b, const StepTiles &step,
                                 Value parity, SmallVector<Value> &sums) {
  const int64_t R = p.rows.rows, c = p.blockSize;
  Value even = cmp(b, P::eq, parity, indexConst(b, 0));
  auto address = [&](int64_t first, int64_t second) {
    return shared->address(b, arith::SelectOp::create(b, even,
                                                      indexConst(b, first),
                                                      indexConst(b, second)));
  };
  Value query = address(p.query, p.queryNext);
  Value gradOut = address(p.gradOut, p.gradOutNext);
  Value row0 = indexConst(b, 0);
  WarpFragments frags{lane, elem};
  // One A fragment a k16 step of the step rows: n8 tiles 2 i and 2 i + 1.
  auto asA = [&](ArrayRef<SmallVector<Value>> tiles) {
    SmallVector<Value> fragments;
    for (int64_t i = 0; i < R / kMmaK; ++i)
      fragments.push_back(frags.accumulatorsAsA(b, tiles.slice(2 * i, 2)));
    return fragments;
  };
  const int64_t kTiles = p.headDim / kMmaCols;
  // dV's (first = kTiles) or dK's (first = 0) sums += `a` times the tile at
  // `tileAddress` read MN-major.
  auto accumulate = [&](Value tileAddress, int64_t width, int64_t first,
                        ArrayRef<Value> a) {
    ArrayRef<Value> part = ArrayRef<Value>(sums).slice(first, width / kMmaCols);
    Value acc = warpgroupProductRegisterA(
        b, elem, width, a, {mnMajorDescriptor(b, tileAddress, R), true, R},
        accumulatorStruct(b, part));
    llvm::copy(accumulatorTiles(b, acc, width), sums.begin() + first);
  };
  // S^T, P^T and dV first, then dP^T, dS^T and dK, each product waited
  // for: at most one m64 x 64 product and P^T are live beside dK and dV.
  // (Issuing dP^T before P^T is computed and dV's product before dS^T, to
  // overlap them, measured 6-12% slower: ptxas then spills 184-204 bytes.)
  Value s = warpgroupProduct(b, elem, R, p.headDim, {keyDesc, false, c},
                             {kMajorDescriptor(b, query), false, R}, Value());
  Value key0 = arith::MulIOp::create(b, warp, indexConst(b, kMmaRows));
  SmallVector<SmallVector<Value>> probs =
      probabilities(b, step, key0, row0, accumulatorTiles(b, s, R), {}).first;
  accumulate(gradOut, p.valueDim, kTiles, asA(probs));
  Value dp =
      warpgroupProduct(b, elem, R, p.valueDim, {valueDesc, false, c},
                       {kMajorDescriptor(b, gradOut), false, R}, Value());
  SmallVector<SmallVector<Value>> grads =
      gradients(b, step, row0, probs, accumulatorTiles(b, dp, R));
  if (p.scores)
    storeScores(b, step, key0, row0, grads);
  accumulate(query, p.headDim, 0, asA(grads));
}

void KeyGradBlock::storeScores(ImplicitLocOpBuilder &b, const StepTiles &step,
                               Value key0, Value row0,
                               ArrayRef<SmallVector<Value>> grads) {
  Value scores = e.arg("scores");
  Value gid = arith::DivUIOp::create(b, lane, indexConst(b, 4));
  Value tig = arith::RemUIOp::create(b, lane, indexConst(b, 4));
  Type i32 = b.getI32Type();
  for (size_t t = 0; t < grads.size(); ++t) {
    ArrayRef<Value> tile = grads[t];
    Value r = tileRow(b, row0, tig, t);
    Value queries = loadRow(b, step.scoreQuery, {r}, 2, i32);
    Value columns = loadRow(b, step.scoreColumn, {r}, 2, i32);
    for (int64_t j = 0; j < 2; ++j) {
      Value column = vector::ExtractOp::create(b, columns, j);
      Value query = toIndex(b, vector::ExtractOp::create(b, queries, j));
      Value holds = arith::CmpIOp::create(
          b, P::sge, column, arith::ConstantIntOp::create(b, 0, 32));
      buildIfThen(b, holds, [&](ImplicitLocOpBuilder &sb) {
        Value first = toIndex(sb, column);
        for (int64_t half = 0; half < 2; ++half) {
          Value key =
              arith::AddIOp::create(sb, arith::AddIOp::create(sb, key0, gid),
                                    indexConst(sb, 8 * half));
          Value v = arith::TruncFOp::create(sb, elem, tile[half * 2 + j]);
          memref::StoreOp::create(
              sb, v, scores,
              ValueRange{batch, kv, query,
                         arith::AddIOp::create(sb, first, key)});
        }
      });
    }
  }
}

void KeyGradBlock::storeSums(ImplicitLocOpBuilder &b, ArrayRef<Value> sums) {
  Value slab = arith::RemUIOp::create(b, warp, indexConst(b, slabs()));
  Value group = arith::DivUIOp::create(b, warp, indexConst(b, slabs()));
  Value gid = arith::DivUIOp::create(b, lane, indexConst(b, 4));
  Value tig = arith::RemUIOp::create(b, lane, indexConst(b, 4));
  Value key0 = arith::AddIOp::create(
      b, arith::MulIOp::create(b, slab, indexConst(b, kMmaRows)), gid);
  const int64_t kTiles = p.headDim / kMmaCols;
  for (int64_t g = 0; g < rowGroups(); ++g) {
    buildIfThen(
        b, cmp(b, P::eq, group, indexConst(b, g)),
        [&](ImplicitLocOpBuilder &wb) {
          for (size_t t = 0; t < sums.size(); ++t) {
            const bool isKey = int64_t(t) < kTiles;
            Value tile = isKey ? dkTile : dvTile;
            Value col = arith::AddIOp::create(
                wb, arith::MulIOp::create(wb, tig, indexConst(wb, 2)),
                indexConst(wb, (isKey ? t : t - kTiles) * kMmaCols));
            for (int64_t half = 0; half < 2; ++half) {
              Value row =
                  arith::AddIOp::create(wb, key0, indexConst(wb, 8 * half));
              Value v = vector::ExtractOp::create(wb, sums[t],
                                                  ArrayRef<int64_t>{half});
              if (g > 0)
                v = arith::AddFOp::create(
                    wb, v, loadRow(wb, tile, {row, col}, 2, wb.getF32Type()));
              storeRow(wb, v, tile, {row, col});
            }
          }
        });
    gpu::BarrierOp::create(b);
  }
}
