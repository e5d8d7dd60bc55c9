//===- DeviceSelection.cpp - Per-query selection inside kernels -----------===//

#include "Selection/DeviceSelection.h"

#include "Kernels/KernelBuilder.h"
#include "Kernels/RowSoftmax.h"

#include "../Common/ForcedBlocks.h"
#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::pisa::detail;

static Value loadIndex(ImplicitLocOpBuilder &b, Value mem, ValueRange idx) {
  Value v = memref::LoadOp::create(b, mem, idx);
  return arith::IndexCastOp::create(b, b.getIndexType(), v);
}

static void storeIndex(ImplicitLocOpBuilder &b, Value value, Value mem,
                       ValueRange idx) {
  Value v = arith::IndexCastOp::create(b, b.getI32Type(), value);
  memref::StoreOp::create(b, v, mem, idx);
}

static Value increment(ImplicitLocOpBuilder &b, Value cond, Value count) {
  return arith::SelectOp::create(
      b, cond, arith::AddIOp::create(b, count, indexConst(b, 1)), count);
}

/// Compacts cand[0..count) in place to the nodes satisfying `keep`.
static Value
compact(ImplicitLocOpBuilder &b, Value cand, Value count,
        llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> keep) {
  Value zero = indexConst(b, 0);
  return buildLoop(b, zero, count, {zero},
                   [&](ImplicitLocOpBuilder &lb, Value a, ValueRange st) {
                     Value node = loadIndex(lb, cand, {a});
                     storeIndex(lb, node, cand, {st[0]});
                     return SmallVector<Value>{
                         increment(lb, keep(lb, node), st[0])};
                   })[0];
}

/// Keeps the best `slots` of count candidates into kept[0..) in candidate
/// order; ranks only when `ranked`. Returns how many were kept.
static Value selectBest(ImplicitLocOpBuilder &b, IndexLoader loadCand,
                        IndexLoader loadScore, Value count, Value slots,
                        Value ranked, Value kept,
                        IndexLoader loadRank = nullptr) {
  Value zero = indexConst(b, 0);
  return buildLoop(
      b, zero, count, {zero},
      [&](ImplicitLocOpBuilder &lb, Value a, ValueRange st) {
        // With ranks precomputed (cooperating warps): keep(a) = !ranked or
        // rank(a) < slots, as buildKeep decides it.
        Value take =
            loadRank
                ? arith::OrIOp::create(
                      lb,
                      arith::XOrIOp::create(
                          lb, ranked, arith::ConstantIntOp::create(lb, 1, 1)),
                      cmp(lb, arith::CmpIPredicate::ult, loadRank(lb, a),
                          slots))
                      .getResult()
                : buildKeep(lb, count, a, slots, ranked, loadScore);
        buildIfThen(lb, take, [&](ImplicitLocOpBuilder &tb) {
          storeIndex(tb, loadCand(tb, a), kept, {st[0]});
        });
        return SmallVector<Value>{increment(lb, take, st[0])};
      })[0];
}

Value mlir::pisa::detail::leafOfPosition(ImplicitLocOpBuilder &b,
                                         const LevelLayout &layout,
                                         Value position) {
  return layout.leafOf(b, position);
}

Value mlir::pisa::detail::leafOfPosition(ImplicitLocOpBuilder &b,
                                         int64_t blockSize, Value numLeaves,
                                         Value position) {
  return arith::MinUIOp::create(
      b, arith::DivUIOp::create(b, position, indexConst(b, blockSize)),
      arith::SubIOp::create(b, numLeaves, indexConst(b, 1)));
}

Value mlir::pisa::detail::contenderSlots(ImplicitLocOpBuilder &b, int64_t topK,
                                         Value bt) {
  return arith::SubIOp::create(b, indexConst(b, topK), forcedBlockCount(b, bt));
}

/// `vec` consecutive elements of `mem` from `indices` (its last index a
/// multiple of vec, so aligned), as f32 values: one vector load.
static SmallVector<Value> loadF32Vector(ImplicitLocOpBuilder &b, Value mem,
                                        ValueRange indices, int64_t vec) {
  Type elem = cast<MemRefType>(mem.getType()).getElementType();
  Value v = vector::LoadOp::create(
      b, VectorType::get({vec}, elem), mem, indices, false,
      llvm::MaybeAlign(vec * elem.getIntOrFloatBitWidth() / 8));
  SmallVector<Value> out;
  for (int64_t i = 0; i < vec; ++i) {
    Value x = vector::ExtractOp::create(b, v, ArrayRef<int64_t>{i});
    out.push_back(
        elem.isF32() ? x
                     : arith::ExtFOp::create(b, b.getF32Type(), x).getResult());
  }
  return out;
}

int64_t WarpQuery::padded() const {
  return int64_t(llvm::PowerOf2Ceil(groupSize));
}

int64_t WarpQuery::headsPerGroup() const { return padded() * width / 32; }

Value WarpQuery::elementOf(ImplicitLocOpBuilder &b, int64_t j) const {
  if (vec == 1)
    return arith::AddIOp::create(b, part, indexConst(b, width * j));
  Value first = arith::MulIOp::create(b, part, indexConst(b, vec));
  return arith::AddIOp::create(
      b, first, indexConst(b, width * vec * (j / vec) + j % vec));
}

int64_t mlir::pisa::detail::narrowQueryWidth(int64_t groupSize,
                                             int64_t headDim) {
  const int64_t padded = int64_t(llvm::PowerOf2Ceil(groupSize));
  if (padded * headDim / 32 > 64)
    return 32;
  int64_t width =
      int64_t(llvm::bit_floor(uint64_t(std::max<int64_t>(1, headDim / 16))));
  return std::clamp<int64_t>(width, 32 / padded, 32);
}

std::optional<WarpQuery>
mlir::pisa::detail::loadWarpQuery(ImplicitLocOpBuilder &b, Value queries,
                                  const QuerySite &site, int64_t groupSize,
                                  int64_t headDim, Value lane, int64_t width) {
  if (headDim % 32 != 0 || groupSize > 32 || groupSize * headDim / 32 > 64)
    return std::nullopt;
  WarpQuery query;
  query.lane = lane;
  query.groupSize = groupSize;
  query.width = width;
  const int64_t span = headDim / width;
  query.vec = width == 32 ? 1 : span % 4 == 0 ? 4 : span % 2 == 0 ? 2 : 1;
  query.part = lane;
  Value head0 = arith::MulIOp::create(b, site.kvHead, indexConst(b, groupSize));
  if (width == 32) {
    // The G rows (the heads past G up to P are zero partials, not rows).
    for (int64_t h = 0; h < groupSize; ++h) {
      Value head = arith::AddIOp::create(b, head0, indexConst(b, h));
      SmallVector<Value> row;
      for (int64_t j = 0; j < span; ++j)
        row.push_back(extractF32(
            b, queries, {site.batch, head, site.query, query.elementOf(b, j)}));
      query.rows.push_back(std::move(row));
    }
    return query;
  }
  // Head hg * H + k of the group, zeros past G (loaded clamped to a real
  // head), a vector of `vec` elements at a time.
  query.part = arith::RemUIOp::create(b, lane, indexConst(b, width));
  query.headGroup = arith::DivUIOp::create(b, lane, indexConst(b, width));
  const int64_t heads = query.headsPerGroup();
  for (int64_t k = 0; k < heads; ++k) {
    Value h = arith::AddIOp::create(
        b, arith::MulIOp::create(b, query.headGroup, indexConst(b, heads)),
        indexConst(b, k));
    Value real = cmp(b, arith::CmpIPredicate::ult, h, indexConst(b, groupSize));
    Value head = arith::AddIOp::create(
        b, head0, arith::MinUIOp::create(b, h, indexConst(b, groupSize - 1)));
    SmallVector<Value> row;
    for (int64_t j = 0; j < span; j += query.vec)
      for (Value x :
           loadF32Vector(b, queries,
                         {site.batch, head, site.query, query.elementOf(b, j)},
                         query.vec))
        row.push_back(arith::SelectOp::create(b, real, x, f32Const(b, 0.0f)));
    query.rows.push_back(std::move(row));
  }
  return query;
}

/// Reduce-scatter of the lanes' per-head partial dot products within groups
/// of `width` lanes: `partial` holds H (a power of two <= width) values per
/// lane; halving steps over lane bits width / 2, width / 4, ... leave each
/// lane one head's sum over the lanes that differ in those bits, and full
/// butterflies over the remaining low bits finish it. H - 1 +
/// log2(width / H) shuffles instead of H * log2(width), and afterwards each
/// head's LSE update runs once, on its own lanes. Returns the sum; the
/// lane's head is headOfLane().
static Value reduceScatterHeads(ImplicitLocOpBuilder &b, Value lane,
                                SmallVector<Value> partial, int64_t width) {
  int64_t offset = width / 2;
  for (; partial.size() > 1; offset /= 2) {
    const size_t half = partial.size() / 2;
    Value upper = cmp(b, arith::CmpIPredicate::ne,
                      arith::AndIOp::create(b, lane, indexConst(b, offset)),
                      indexConst(b, 0));
    SmallVector<Value> kept;
    for (size_t i = 0; i < half; ++i) {
      Value keep =
          arith::SelectOp::create(b, upper, partial[half + i], partial[i]);
      Value send =
          arith::SelectOp::create(b, upper, partial[i], partial[half + i]);
      kept.push_back(
          arith::AddFOp::create(b, keep, shuffleXor(b, send, offset)));
    }
    partial = std::move(kept);
  }
  Value v = partial[0];
  for (; offset >= 1; offset /= 2)
    v = arith::AddFOp::create(b, v, shuffleXor(b, v, offset));
  return v;
}

/// The head (of the query's P) whose sum reduceScatterHeads leaves in the
/// query's lane, its group holding `heads` of them.
static Value headOfLane(ImplicitLocOpBuilder &b, const WarpQuery &query,
                        int64_t heads) {
  Value head = query.width == 32 ? indexConst(b, 0)
                                 : arith::MulIOp::create(b, query.headGroup,
                                                         indexConst(b, heads))
                                       .getResult();
  for (int64_t offset = query.width / 2, n = heads; n > 1;
       offset /= 2, n /= 2) {
    Value bit = arith::DivUIOp::create(
        b, arith::AndIOp::create(b, query.lane, indexConst(b, offset)),
        indexConst(b, offset));
    head = arith::AddIOp::create(
        b, head, arith::MulIOp::create(b, bit, indexConst(b, n / 2)));
  }
  return head;
}

namespace {
using ChildLoader =
    llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value)>;
using ChildFolder = llvm::function_ref<SmallVector<Value>(
    ImplicitLocOpBuilder &, ArrayRef<Value>, ValueRange)>;
} // namespace

/// Folds children 0 .. count - 1 (`load(c)`, then `fold(row, state)`) into
/// `init`, in order. With `rowsInFlight` > 1 the rows of that many children
/// are loaded before any is folded, so their latencies overlap (a row past
/// the last is loaded clamped and not folded).
static SmallVector<Value> foldChildren(ImplicitLocOpBuilder &b, Value count,
                                       int64_t rowsInFlight, ValueRange init,
                                       ChildLoader load, ChildFolder fold) {
  if (rowsInFlight == 1)
    return buildLoop(b, indexConst(b, 0), count, init,
                     [&](ImplicitLocOpBuilder &cb, Value c, ValueRange st) {
                       return fold(cb, load(cb, c), st);
                     });
  Value last = arith::SubIOp::create(b, count, indexConst(b, 1));
  return buildLoop(
      b, indexConst(b, 0), count, indexConst(b, rowsInFlight), init,
      [&](ImplicitLocOpBuilder &cb, Value c, ValueRange st) {
        SmallVector<SmallVector<Value>> rows;
        SmallVector<Value> at;
        for (int64_t u = 0; u < rowsInFlight; ++u) {
          at.push_back(arith::AddIOp::create(cb, c, indexConst(cb, u)));
          rows.push_back(load(cb, arith::MinUIOp::create(cb, at.back(), last)));
        }
        SmallVector<Value> s(st.begin(), st.end());
        for (int64_t u = 0; u < rowsInFlight; ++u) {
          SmallVector<Value> next = fold(cb, rows[u], s);
          Value real = cmp(cb, arith::CmpIPredicate::ult, at[u], count);
          for (size_t k = 0; k < s.size(); ++k)
            s[k] = arith::SelectOp::create(cb, real, next[k], s[k]);
        }
        return s;
      });
}

/// The query's score from each lane's head (max, sum) in base e: the heads'
/// LSEs summed once per head (its lowest lane, real heads only) over the
/// warp.
static Value sumHeadLses(ImplicitLocOpBuilder &b, const WarpQuery &query,
                         int64_t padded, Value max, Value sum) {
  Value head = headOfLane(b, query, padded);
  Value owner = arith::AndIOp::create(
      b,
      cmp(b, arith::CmpIPredicate::eq,
          arith::AndIOp::create(b, query.lane,
                                indexConst(b, query.width / padded - 1)),
          indexConst(b, 0)),
      cmp(b, arith::CmpIPredicate::ult, head, indexConst(b, query.groupSize)));
  Value lse = arith::AddFOp::create(b, max, math::LogOp::create(b, sum));
  return laneSum(b, arith::SelectOp::create(b, owner, lse, f32Const(b, 0.0f)),
                 halvingLaneMasks(32));
}

Value mlir::pisa::detail::buildWarpGroupScore(
    ImplicitLocOpBuilder &b, const WarpQuery &query, Value children,
    const QuerySite &site, const ChildLevel &level, Value node, float scale,
    int64_t rowsInFlight) {
  const int64_t chunks = query.rows[0].size();
  // Partials per lane: the group's heads (zeros past G).
  const int64_t padded = query.headsPerGroup();
  auto valid = validChildren(b, site, level, node);
  Value rowBase = arith::AddIOp::create(b, level.rowBase, valid.first);
  auto fast = arith::FastMathFlags::reassoc | arith::FastMathFlags::contract;
  Value zeroF = f32Const(b, 0.0f);
  Value negInf = f32Const(b, -std::numeric_limits<float>::infinity());
  Value scaleF = f32Const(b, scale);
  auto loadChild = [&](ImplicitLocOpBuilder &cb, Value c) {
    Value row = arith::AddIOp::create(cb, rowBase, c);
    SmallVector<Value> child;
    if (query.vec == 1) {
      for (int64_t j = 0; j < chunks; ++j)
        child.push_back(extractF32(
            cb, children, level.at(cb, site, row, query.elementOf(cb, j))));
      return child;
    }
    for (int64_t j = 0; j < chunks; j += query.vec)
      llvm::append_range(
          child, loadF32Vector(cb, children,
                               level.at(cb, site, row, query.elementOf(cb, j)),
                               query.vec));
    return child;
  };
  // Folds one child into the running (max, sum) of the lane's head.
  auto fold = [&](ImplicitLocOpBuilder &cb, ArrayRef<Value> child,
                  ValueRange st) {
    SmallVector<Value> partial(padded, zeroF);
    for (int64_t h = 0; h < int64_t(query.rows.size()); ++h) {
      Value acc = zeroF;
      for (int64_t j = 0; j < chunks; ++j)
        acc = arith::AddFOp::create(
            cb, acc,
            arith::MulFOp::create(cb, query.rows[h][j], child[j], fast), fast);
      partial[h] = acc;
    }
    Value dot = reduceScatterHeads(cb, query.lane, partial, query.width);
    return onlineLseUpdate(cb, st[0], st[1],
                           arith::MulFOp::create(cb, dot, scaleF));
  };
  if (query.width < 32)
    rowsInFlight = std::clamp<int64_t>(32 / chunks, 1, rowsInFlight);
  SmallVector<Value> state = foldChildren(b, valid.second, rowsInFlight,
                                          {negInf, zeroF}, loadChild, fold);
  return sumHeadLses(b, query, padded, state[0], state[1]);
}

std::function<Value(ImplicitLocOpBuilder &, Value)>
mlir::pisa::detail::sharedRankLoader(const QueryScratch &scratch) {
  if (!scratch.sharedRank)
    return nullptr;
  Value ranks = scratch.sharedRank;
  return [ranks](ImplicitLocOpBuilder &b, Value a) -> Value {
    return toIndex(b, memref::LoadOp::create(b, ranks, ValueRange{a}));
  };
}

void mlir::pisa::detail::shareScores(
    ImplicitLocOpBuilder &b, const QueryScratch &scratch, Value count,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> scoreOf) {
  // The previous exchange's reads of `shared` are done.
  gpu::BarrierOp::create(b);
  buildLoop(b, scratch.warp, count, indexConst(b, scratch.warps), {},
            [&](ImplicitLocOpBuilder &lb, Value a, ValueRange) {
              Value u = scoreOf(lb, a);
              buildIfThen(lb,
                          cmp(lb, arith::CmpIPredicate::eq, scratch.lane,
                              indexConst(lb, 0)),
                          [&](ImplicitLocOpBuilder &wb) {
                            memref::StoreOp::create(wb, u, scratch.shared,
                                                    ValueRange{a});
                          });
              return SmallVector<Value>{};
            });
  gpu::BarrierOp::create(b);
}

void mlir::pisa::detail::scoreCandidates(
    ImplicitLocOpBuilder &b, const QueryScratch &scratch, Value count,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> scoreOf) {
  Value zero = indexConst(b, 0);
  auto store = [&](ImplicitLocOpBuilder &lb, Value v, Value to, Value a) {
    memref::StoreOp::create(lb, v, to, ValueRange{a});
  };
  if (scratch.warps == 1) {
    buildLoop(b, zero, count, {},
              [&](ImplicitLocOpBuilder &lb, Value a, ValueRange) {
                store(lb, scoreOf(lb, a), scratch.scores, a);
                return SmallVector<Value>{};
              });
    return;
  }
  shareScores(b, scratch, count, scoreOf);
  // Thread t ranks item t (t, t + threads, ...), reading the shared scores.
  Value tid = arith::AddIOp::create(
      b, arith::MulIOp::create(b, scratch.warp, indexConst(b, 32)),
      scratch.lane);
  auto sharedScore = [&](ImplicitLocOpBuilder &lb, Value a) -> Value {
    return memref::LoadOp::create(lb, scratch.shared, ValueRange{a});
  };
  buildLoop(b, tid, count, indexConst(b, 32 * scratch.warps), {},
            [&](ImplicitLocOpBuilder &lb, Value a, ValueRange) {
              Value rank = buildRank(lb, count, a, sharedScore);
              memref::StoreOp::create(
                  lb, arith::IndexCastOp::create(lb, lb.getI32Type(), rank),
                  scratch.sharedRank, ValueRange{a});
              return SmallVector<Value>{};
            });
  gpu::BarrierOp::create(b);
  buildLoop(b, zero, count, {},
            [&](ImplicitLocOpBuilder &lb, Value a, ValueRange) {
              store(lb, sharedScore(lb, a), scratch.scores, a);
              return SmallVector<Value>{};
            });
}

Value mlir::pisa::detail::buildWalk(ImplicitLocOpBuilder &b,
                                    const WalkConfig &config, NodeScorer score,
                                    Value bt, const QueryScratch &scratch) {
  const LevelLayout &layout = config.layout;
  Value zero = indexConst(b, 0), one = indexConst(b, 1);
  Value cK = indexConst(b, config.topK);
  Value cFan = indexConst(b, layout.branching());
  storeIndex(b, zero, scratch.cand, {zero});

  auto loadCand = [&](ImplicitLocOpBuilder &lb, Value a) {
    return loadIndex(lb, scratch.cand, {a});
  };
  auto loadScore = [&](ImplicitLocOpBuilder &lb, Value a) -> Value {
    return memref::LoadOp::create(lb, scratch.scores, ValueRange{a});
  };
  auto step = [&](ImplicitLocOpBuilder &b, const LevelLayout::Step &level,
                  ValueRange state) -> SmallVector<Value> {
    Value span = level.span;
    Value numCausal = compact(
        b, scratch.cand, state[0], [&](ImplicitLocOpBuilder &cb, Value node) {
          return cmp(cb, arith::CmpIPredicate::ule,
                     arith::MulIOp::create(cb, node, span), bt);
        });
    const ChildLevel &children = level.children;
    Value childCount = children.numChildren;
    Value ranked = cmp(b, arith::CmpIPredicate::ugt, numCausal, cK);
    buildIfThen(b, ranked, [&](ImplicitLocOpBuilder &tb) {
      scoreCandidates(tb, scratch, numCausal,
                      [&](ImplicitLocOpBuilder &lb, Value a) {
                        return score(lb, children, loadCand(lb, a));
                      });
    });
    auto loadRank = sharedRankLoader(scratch);
    Value numKept =
        selectBest(b, loadCand, loadScore, numCausal, cK, ranked, scratch.kept,
                   loadRank ? IndexLoader(loadRank) : nullptr);
    // The next candidates: existing children of the kept nodes, ascending.
    return buildLoop(
        b, zero, numKept, {zero},
        [&](ImplicitLocOpBuilder &lb, Value k, ValueRange st) {
          Value first =
              arith::MulIOp::create(lb, loadIndex(lb, scratch.kept, {k}), cFan);
          return buildLoop(
              lb, zero, cFan, {st[0]},
              [&](ImplicitLocOpBuilder &cb, Value c, ValueRange cs) {
                Value child = arith::AddIOp::create(cb, first, c);
                storeIndex(cb, child, scratch.cand, {cs[0]});
                return SmallVector<Value>{increment(
                    cb, cmp(cb, arith::CmpIPredicate::ult, child, childCount),
                    cs[0])};
              });
        });
  };
  Value numCand = layout.walkDown(b, {one}, step)[0];
  // Leaves: the causal ones outside the forced set {0, b_t - 1, b_t}.
  Value previous = previousBlock(b, bt);
  return compact(b, scratch.cand, numCand,
                 [&](ImplicitLocOpBuilder &cb, Value node) {
                   return isLeafContender(cb, node, bt, previous);
                 });
}

/// The end of a final selection row: the forced blocks 0, b_t - 1 and b_t
/// (those that exist) at position keptBelow(f) + the forced blocks below
/// f, then -1 from numKept + |forced| to K. `hasBt` = b_t >= 1,
/// `hasBtMinus1` = b_t >= 2, `btMinus1` = previousBlock(b_t).
static void writeForcedAndPadding(
    ImplicitLocOpBuilder &b, int64_t topK, Value bt, Value btMinus1,
    Value hasBt, Value hasBtMinus1, Value slots,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value f)> keptBelow,
    llvm::function_ref<Value(ImplicitLocOpBuilder &)> numKept,
    IndexStorer store) {
  Value zero = indexConst(b, 0), one = indexConst(b, 1), two = indexConst(b, 2);
  auto placeForced = [&](ImplicitLocOpBuilder &fb, Value f, Value forcedBelow) {
    store(fb, arith::AddIOp::create(fb, keptBelow(fb, f), forcedBelow), f);
  };
  placeForced(b, zero, zero);
  buildIfThen(b, hasBtMinus1, [&](ImplicitLocOpBuilder &tb) {
    placeForced(tb, btMinus1, one);
  });
  buildIfThen(b, hasBt, [&](ImplicitLocOpBuilder &tb) {
    placeForced(tb, bt, arith::SelectOp::create(tb, hasBtMinus1, two, one));
  });
  Value numForced = arith::SubIOp::create(b, indexConst(b, topK), slots);
  Value pad = indexConst(b, -1);
  buildLoop(b, arith::AddIOp::create(b, numKept(b), numForced),
            indexConst(b, topK), {},
            [&](ImplicitLocOpBuilder &lb, Value p, ValueRange) {
              store(lb, p, pad);
              return SmallVector<Value>{};
            });
}

void mlir::pisa::detail::buildFinalSelection(
    ImplicitLocOpBuilder &b, int64_t topK, Value bt, Value numContenders,
    IndexLoader loadCand, IndexLoader loadScore, Value kept, IndexStorer store,
    IndexLoader loadRank) {
  Value zero = indexConst(b, 0), one = indexConst(b, 1), two = indexConst(b, 2);
  Value slots = contenderSlots(b, topK, bt);
  Value ranked = cmp(b, arith::CmpIPredicate::ugt, numContenders, slots);
  Value numKept = selectBest(b, loadCand, loadScore, numContenders, slots,
                             ranked, kept, loadRank);

  Value hasBt = cmp(b, arith::CmpIPredicate::uge, bt, one);
  Value hasBtMinus1 = cmp(b, arith::CmpIPredicate::uge, bt, two);
  Value btMinus1 = previousBlock(b, bt);
  // Kept contenders: position = index among kept + forced blocks below.
  buildLoop(b, zero, numKept, {},
            [&](ImplicitLocOpBuilder &lb, Value p, ValueRange) {
              Value x = loadIndex(lb, kept, {p});
              store(lb,
                    arith::AddIOp::create(
                        lb, p, forcedBlocksBelow(lb, x, bt, btMinus1)),
                    x);
              return SmallVector<Value>{};
            });
  writeForcedAndPadding(
      b, topK, bt, btMinus1, hasBt, hasBtMinus1, slots,
      [&](ImplicitLocOpBuilder &fb, Value f) {
        return buildLoop(
            fb, zero, numKept, {zero},
            [&](ImplicitLocOpBuilder &lb, Value p, ValueRange r) {
              Value x = loadIndex(lb, kept, {p});
              return SmallVector<Value>{increment(
                  lb, cmp(lb, arith::CmpIPredicate::ult, x, f), r[0])};
            })[0];
      },
      [&](ImplicitLocOpBuilder &) { return numKept; }, store);
}

void mlir::pisa::detail::buildFinalSelectionInRegisters(
    ImplicitLocOpBuilder &b, int64_t topK, int64_t capacity, Value bt,
    Value numContenders, IndexLoader loadCand, IndexLoader loadScore,
    IndexStorer store) {
  assert(capacity <= kRegisterContenders && "too many contenders to unroll");
  Type i32 = b.getI32Type();
  Value one = indexConst(b, 1), two = indexConst(b, 2);
  Value zero32 = arith::ConstantIntOp::create(b, i32, 0);
  // A flag as 0 or 1 (i32), and an i32 count as an index.
  auto count = [&](ImplicitLocOpBuilder &cb, Value flag) -> Value {
    return arith::ExtUIOp::create(cb, i32, flag);
  };
  auto asIndex = [&](ImplicitLocOpBuilder &cb, Value v) -> Value {
    return arith::IndexCastUIOp::create(cb, cb.getIndexType(), v);
  };
  Value slots = contenderSlots(b, topK, bt);
  Value slots32 = arith::IndexCastUIOp::create(b, i32, slots);
  Value unranked = cmp(b, arith::CmpIPredicate::ule, numContenders, slots);
  SmallVector<Value> valid, block, score;
  for (int64_t a = 0; a < capacity; ++a) {
    Value at = indexConst(b, a);
    valid.push_back(cmp(b, arith::CmpIPredicate::ult, at, numContenders));
    block.push_back(loadCand(b, at));
    score.push_back(rankableScore(b, loadScore(b, at)));
  }
  // keep(a): a < count and (no ranking, or fewer than `slots` contenders
  // beat it: a higher score, or an equal one at a lower index; buildRank's
  // order, NaNs ranked as -inf).
  SmallVector<Value> keep;
  for (int64_t a = 0; a < capacity; ++a) {
    Value rank = zero32;
    for (int64_t o = 0; o < capacity; ++o) {
      if (o == a)
        continue;
      Value beats = arith::CmpFOp::create(
          b, o < a ? arith::CmpFPredicate::OGE : arith::CmpFPredicate::OGT,
          score[o], score[a]);
      rank = arith::AddIOp::create(
          b, rank, count(b, arith::AndIOp::create(b, valid[o], beats)));
    }
    Value inSlots = cmp(b, arith::CmpIPredicate::ult, rank, slots32);
    keep.push_back(arith::AndIOp::create(
        b, valid[a], arith::OrIOp::create(b, unranked, inSlots)));
  }
  Value hasBt = cmp(b, arith::CmpIPredicate::uge, bt, one);
  Value hasBtMinus1 = cmp(b, arith::CmpIPredicate::uge, bt, two);
  Value btMinus1 = previousBlock(b, bt);
  // Kept contender a: position = kept contenders before it + the forced
  // blocks below it.
  Value numKept = zero32;
  for (int64_t a = 0; a < capacity; ++a) {
    Value before = asIndex(b, numKept);
    Value position = arith::AddIOp::create(
        b, before, forcedBlocksBelow(b, block[a], bt, btMinus1));
    buildIfThen(b, keep[a], [&](ImplicitLocOpBuilder &tb) {
      store(tb, position, block[a]);
    });
    numKept = arith::AddIOp::create(b, numKept, count(b, keep[a]));
  }
  writeForcedAndPadding(
      b, topK, bt, btMinus1, hasBt, hasBtMinus1, slots,
      [&](ImplicitLocOpBuilder &fb, Value f) {
        Value keptBelow = zero32;
        for (int64_t a = 0; a < capacity; ++a)
          keptBelow = arith::AddIOp::create(
              fb, keptBelow,
              count(fb, arith::AndIOp::create(
                            fb, keep[a],
                            cmp(fb, arith::CmpIPredicate::ult, block[a], f))));
        return asIndex(fb, keptBelow);
      },
      [&](ImplicitLocOpBuilder &nb) { return asIndex(nb, numKept); }, store);
}
