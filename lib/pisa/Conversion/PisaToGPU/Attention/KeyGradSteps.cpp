//===- KeyGradSteps.cpp - The key kernel's walk and steps -----------------===//
//
// KeyGradBlock's walk over the queries of its segment (the set bits of the
// block's query-bit words, a window of words at a time into a list in
// shared memory) and its steps over them: staged (S, dP, P^T and dS^T
// through shared memory, warps split dv and d) or in registers (each warp
// owns 16 keys, the products transposed so that the keys are the mma rows,
// dK and dV in the lanes' registers). KeyGradBlock.h.
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionGrad.h"
#include "Attention/AttentionSteps.h"
#include "Attention/KeyGradBlock.h"
#include "Attention/SparseAttention.h"
#include "Kernels/KernelBuilder.h"
#include "Kernels/RowSoftmax.h"
#include "Kernels/WarpMma.h"
#include "Selection/PackedSequences.h"
#include "Selection/QueryKernels.h"

#include "../Common/LoopBuilders.h"

#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
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

std::pair<Value, Value> KeyGradBlock::segmentWords(ImplicitLocOpBuilder &b) {
  Value begin = arith::MinUIOp::create(
      b, toWordBase(b, arith::MulIOp::create(b, segment, wordsPerSegment)),
      numWords);
  Value end = arith::MinUIOp::create(
      b, arith::AddIOp::create(b, begin, wordsPerSegment), numWords);
  if (endQueryWord)
    end = arith::MinUIOp::create(b, end, endQueryWord);
  begin = arith::MinUIOp::create(b, arith::MaxUIOp::create(b, begin, firstWord),
                                 end);
  return {begin, end};
}

SmallVector<Value> KeyGradBlock::forEachStep(ImplicitLocOpBuilder &b,
                                             ValueRange init, StepFn step) {
  std::pair<Value, Value> words = segmentWords(b);
  Value begin = words.first, end = words.second;
  const int64_t tokens = p.rows.tokens;
  SmallVector<Value> start(init.begin(), init.end());
  start.push_back(indexConst(b, 0));
  SmallVector<Value> out = buildLoop(
      b, begin, end, indexConst(b, p.windowWords), start,
      [&](ImplicitLocOpBuilder &lb, Value w0,
          ValueRange st) -> SmallVector<Value> {
        Value pending = st.back();
        gpu::BarrierOp::create(lb); // the list's front and count are read
        appendWindow(lb, w0, end, pending);
        gpu::BarrierOp::create(lb);
        Value count = toIndex(
            lb, memref::LoadOp::create(lb, listCount, indexConst(lb, 0)));
        Value full = arith::DivUIOp::create(lb, count, indexConst(lb, tokens));
        SmallVector<Value> state = buildLoop(
            lb, indexConst(lb, 0), full, st.drop_back(),
            [&](ImplicitLocOpBuilder &sb, Value s, ValueRange inner) {
              return step(sb,
                          arith::MulIOp::create(sb, s, indexConst(sb, tokens)),
                          indexConst(sb, tokens), inner);
            });
        Value used = arith::MulIOp::create(lb, full, indexConst(lb, tokens));
        Value rest = arith::SubIOp::create(lb, count, used);
        Value from =
            arith::MinUIOp::create(lb, arith::AddIOp::create(lb, used, tid),
                                   indexConst(lb, p.listCapacity - 1));
        Value query = memref::LoadOp::create(lb, list, from);
        gpu::BarrierOp::create(lb); // every thread has read its query
        buildIfThen(lb, cmp(lb, P::ult, tid, rest),
                    [&](ImplicitLocOpBuilder &wb) {
                      memref::StoreOp::create(wb, query, list, tid);
                    });
        state.push_back(rest);
        return state;
      });
  Value pending = out.back();
  out.pop_back();
  return buildIf(
      b, cmp(b, P::ugt, pending, indexConst(b, 0)), ValueRange(out).getTypes(),
      [&](ImplicitLocOpBuilder &tb) {
        gpu::BarrierOp::create(tb); // the list's front is written
        return step(tb, indexConst(tb, 0), pending, out);
      },
      [&](ImplicitLocOpBuilder &) { return out; });
}

void KeyGradBlock::appendWindow(ImplicitLocOpBuilder &b, Value w0, Value end,
                                Value pending) {
  Type i32 = b.getI32Type();
  buildIfThen(
      b, cmp(b, P::eq, warp, indexConst(b, 0)), [&](ImplicitLocOpBuilder &wb) {
        Value w = arith::AddIOp::create(wb, w0, lane);
        Value inWindow = arith::AndIOp::create(
            wb, cmp(wb, P::ult, w, end),
            cmp(wb, P::ult, lane, indexConst(wb, p.windowWords)));
        Value word = buildIf(
            wb, inWindow, TypeRange{i32},
            [&](ImplicitLocOpBuilder &tb) -> SmallVector<Value> {
              return {memref::LoadOp::create(tb, e.arg("queryBits"),
                                             ValueRange{batch, kv, block, w})};
            },
            [&](ImplicitLocOpBuilder &fb) -> SmallVector<Value> {
              return {arith::ConstantIntOp::create(fb, 0, 32)};
            })[0];
        Value bits = math::CtPopOp::create(wb, word);
        Value upTo = bits; // inclusive prefix sum over the lanes
        Value lane32 = toI32(wb, lane);
        for (int64_t k = 1; k < 32; k *= 2) {
          Value below = gpu::ShuffleOp::create(
                            wb, upTo, arith::ConstantIntOp::create(wb, k, 32),
                            arith::ConstantIntOp::create(wb, 32, 32),
                            gpu::ShuffleMode::UP)
                            .getShuffleResult();
          Value has = arith::CmpIOp::create(
              wb, P::sge, lane32, arith::ConstantIntOp::create(wb, k, 32));
          upTo = arith::AddIOp::create(
              wb, upTo,
              arith::SelectOp::create(wb, has, below,
                                      arith::ConstantIntOp::create(wb, 0, 32)));
        }
        Value at = arith::AddIOp::create(
            wb, pending, toIndex(wb, arith::SubIOp::create(wb, upTo, bits)));
        Value first = arith::MulIOp::create(wb, w, indexConst(wb, 32));
        Type index = wb.getIndexType();
        scf::WhileOp::create(
            wb, TypeRange{i32, index}, ValueRange{word, at},
            [&](OpBuilder &ob, Location loc, ValueRange args) {
              ImplicitLocOpBuilder cb(loc, ob);
              Value more = arith::CmpIOp::create(
                  cb, P::ne, args[0], arith::ConstantIntOp::create(cb, 0, 32));
              scf::ConditionOp::create(cb, more, args);
            },
            [&](OpBuilder &ob, Location loc, ValueRange args) {
              ImplicitLocOpBuilder lb(loc, ob);
              Value bit = math::CountTrailingZerosOp::create(lb, args[0]);
              Value query = arith::AddIOp::create(lb, first, toIndex(lb, bit));
              memref::StoreOp::create(lb, toI32(lb, query), list, args[1]);
              Value rest = arith::AndIOp::create(
                  lb, args[0],
                  arith::SubIOp::create(
                      lb, args[0], arith::ConstantIntOp::create(lb, 1, 32)));
              scf::YieldOp::create(
                  lb, ValueRange{rest, arith::AddIOp::create(
                                           lb, args[1], indexConst(lb, 1))});
            });
        buildIfThen(wb, cmp(wb, P::eq, lane, indexConst(wb, 31)),
                    [&](ImplicitLocOpBuilder &lb) {
                      memref::StoreOp::create(
                          lb,
                          arith::AddIOp::create(lb, toI32(lb, pending), upTo),
                          listCount, indexConst(lb, 0));
                    });
      });
}

Value KeyGradBlock::slotQuery(ImplicitLocOpBuilder &b, Value first, Value slot,
                              Value n) {
  Value at = arith::MinUIOp::create(b, arith::AddIOp::create(b, first, slot),
                                    indexConst(b, p.listCapacity - 1));
  Value q = toIndex(b, memref::LoadOp::create(b, list, at));
  return arith::SelectOp::create(b, holds(b, slot, n), q, indexConst(b, 0));
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
  Value position = arith::AddIOp::create(b, queryShift, query);
  Value keyEnd = arith::MinUIOp::create(
      b, numKeys, arith::AddIOp::create(b, position, indexConst(b, 1)));
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

void KeyGradBlock::stageRowFacts(ImplicitLocOpBuilder &b, Value first,
                                 Value n) {
  const int64_t perToken = p.rows.rowsPerToken;
  buildIfThen(
      b, cmp(b, P::ult, tid, indexConst(b, p.rows.rows)),
      [&](ImplicitLocOpBuilder &rb) {
        Value slot = arith::DivUIOp::create(rb, tid, indexConst(rb, perToken));
        Value h = arith::RemUIOp::create(rb, tid, indexConst(rb, perToken));
        Value query = slotQuery(rb, first, slot, n);
        Value head = arith::AddIOp::create(
            rb, firstHead,
            arith::MinUIOp::create(rb, h, indexConst(rb, G - 1)));
        Value isHead = arith::AndIOp::create(
            rb, cmp(rb, P::ult, h, indexConst(rb, G)), holds(rb, slot, n));
        Value lse = memref::LoadOp::create(rb, e.arg("lse"),
                                           ValueRange{batch, head, query});
        Value delta = memref::LoadOp::create(rb, e.arg("delta"),
                                             ValueRange{batch, head, query});
        Value keyEnd = arith::MinUIOp::create(
            rb, numKeys,
            arith::AddIOp::create(rb,
                                  arith::AddIOp::create(rb, queryShift, query),
                                  indexConst(rb, 1)));
        Value visible = arith::SelectOp::create(
            rb, cmp(rb, P::ugt, keyEnd, firstKey),
            arith::SubIOp::create(rb, keyEnd, firstKey), indexConst(rb, 0));
        memref::StoreOp::create(rb, probabilityShift(rb, lse, isHead), rowShift,
                                tid);
        memref::StoreOp::create(rb, delta, rowDelta, tid);
        memref::StoreOp::create(
            rb,
            toI32(rb, arith::MinUIOp::create(rb, visible,
                                             indexConst(rb, p.blockSize))),
            rowVisible, tid);
      });
}

SmallVector<Value> KeyGradBlock::registerStep(ImplicitLocOpBuilder &b,
                                              Value first, Value n,
                                              ValueRange sums) {
  stageStepRows(b, first, n);
  stageRowFacts(b, first, n);
  gpu::BarrierOp::create(b);
  SmallVector<Value> next(sums.begin(), sums.end());
  Value slab = arith::RemUIOp::create(b, warp, indexConst(b, slabs()));
  Value group = arith::DivUIOp::create(b, warp, indexConst(b, slabs()));
  Value key0 = arith::MulIOp::create(b, slab, indexConst(b, kMmaRows));
  const int64_t chunks = p.rows.rows / kMmaK / rowGroups();
  for (int64_t i = 0; i < chunks; ++i) {
    Value row0 = arith::MulIOp::create(
        b, arith::AddIOp::create(b, group, indexConst(b, i * rowGroups())),
        indexConst(b, kMmaK));
    chunk(b, key0, row0, next);
  }
  gpu::BarrierOp::create(b); // the tiles are read before the next step
  return next;
}

void KeyGradBlock::chunk(ImplicitLocOpBuilder &b, Value key0, Value row0,
                         SmallVector<Value> &sums) {
  const float inf = std::numeric_limits<float>::infinity();
  WarpFragments frags{lane, elem};
  SmallVector<Value> s =
      frags.productNT(b, kTile, key0, qTile, row0, p.headDim, 2);
  SmallVector<Value> dp =
      frags.productNT(b, vTile, key0, doTile, row0, p.valueDim, 2);
  Value gid = arith::DivUIOp::create(b, lane, indexConst(b, 4));
  Value tig = arith::RemUIOp::create(b, lane, indexConst(b, 4));
  Value keyRow = toI32(b, arith::AddIOp::create(b, key0, gid));
  Value logScale = f32Const(b, scale * kLog2E);
  Value negInf = f32Const(b, -inf);
  // probs[t][half * 2 + j]: key key0 + gid + 8 half, row row0 + 8 t + 2
  // tig + j.
  SmallVector<SmallVector<Value>> probs(2), grads(2);
  for (int64_t t = 0; t < 2; ++t) {
    Value r = arith::AddIOp::create(
        b, arith::AddIOp::create(b, row0, indexConst(b, 8 * t)),
        arith::MulIOp::create(b, tig, indexConst(b, 2)));
    Value shift = loadRow(b, rowShift, {r}, 2, b.getF32Type());
    Value delta = loadRow(b, rowDelta, {r}, 2, b.getF32Type());
    Value visible = loadRow(b, rowVisible, {r}, 2, b.getI32Type());
    for (int64_t half = 0; half < 2; ++half) {
      Value key = arith::AddIOp::create(
          b, keyRow, arith::ConstantIntOp::create(b, 8 * half, 32));
      for (int64_t j = 0; j < 2; ++j) {
        SmallVector<int64_t> at{half, j};
        Value seen = arith::CmpIOp::create(
            b, P::slt, key, vector::ExtractOp::create(b, visible, j));
        Value logit = maskedLogit(b, vector::ExtractOp::create(b, s[t], at),
                                  seen, logScale, negInf);
        Value prob =
            shiftedExp2(b, logit, vector::ExtractOp::create(b, shift, j));
        Value grad = arith::MulFOp::create(
            b, prob,
            arith::SubFOp::create(b, vector::ExtractOp::create(b, dp[t], at),
                                  vector::ExtractOp::create(b, delta, j)));
        probs[t].push_back(prob);
        grads[t].push_back(grad);
      }
    }
  }
  Value pA = frags.accumulatorsAsA(b, probs);
  Value dsA = frags.accumulatorsAsA(b, grads);
  const int64_t kTiles = p.headDim / kMmaCols;
  for (int64_t t = 0; t < kTiles; ++t)
    sums[t] = frags.accumulateKN(b, dsA, qTile, row0, t * kMmaCols, sums[t]);
  for (int64_t t = 0; t < p.valueDim / kMmaCols; ++t)
    sums[kTiles + t] =
        frags.accumulateKN(b, pA, doTile, row0, t * kMmaCols, sums[kTiles + t]);
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
