//===- SelectionToLoops.cpp - lse_score and hier_topk to scf loops --------===//
//
// Selection is data dependent, so it lowers to scf loops over
// (batch, KV head, query) rather than to structured ops. Per query the
// state is three small tensors threaded through the loops as iter_args
// (candidates [g*K], kept [K], scores [g*K]), so one-shot bufferization
// updates them in place and nothing scales with Nq x (number of leaves).
//
//===----------------------------------------------------------------------===//

#include "../Common/ForcedBlocks.h"
#include "../Common/LayoutTables.h"
#include "../Common/LoopBuilders.h"
#include "../Common/NodeScore.h"

#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/Conversion/PisaToLinalg/PisaToLinalg.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::pisa;
using namespace mlir::pisa::detail;

/// Compacts, in place, the first `count` entries of `cand` that satisfy
/// `keep`, preserving order. Returns {cand, kept count}. Writing at the
/// compacted position (<= the read position) is safe without a branch.
static SmallVector<Value>
compact(ImplicitLocOpBuilder &b, Value cand, Value count,
        llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> keep) {
  Value zero = indexConst(b, 0), one = indexConst(b, 1);
  return buildLoop(b, zero, count, {cand, zero},
                   [&](ImplicitLocOpBuilder &lb, Value a, ValueRange st) {
                     Value node = extractIndex(lb, st[0], {a});
                     Value ok = keep(lb, node);
                     Value updated = insertIndex(lb, node, st[0], {st[1]});
                     Value next = arith::SelectOp::create(
                         lb, ok, arith::AddIOp::create(lb, st[1], one), st[1]);
                     return SmallVector<Value>{updated, next};
                   });
}

/// Keeps the `slots` best of cand[0..count) by score into kept[0..), in
/// candidate (= ascending index) order. Ties go to the lower position, which
/// is the lower node index. When `ranked` is false everything is kept.
/// Returns {kept, kept count}.
static SmallVector<Value> selectBest(ImplicitLocOpBuilder &b, Value cand,
                                     Value scores, Value count, Value slots,
                                     Value ranked, Value kept) {
  Value zero = indexConst(b, 0), one = indexConst(b, 1);
  return buildLoop(
      b, zero, count, {kept, zero},
      [&](ImplicitLocOpBuilder &lb, Value a, ValueRange st) {
        Value take =
            buildKeep(lb, count, a, slots, ranked,
                      [&](ImplicitLocOpBuilder &sb, Value o) -> Value {
                        return tensor::ExtractOp::create(sb, scores, o);
                      });
        Value updated = buildIf(
            lb, take, {st[0].getType()},
            [&](ImplicitLocOpBuilder &tb) {
              Value node = extractIndex(tb, cand, {a});
              return SmallVector<Value>{insertIndex(tb, node, st[0], {st[1]})};
            },
            [&](ImplicitLocOpBuilder &) {
              return SmallVector<Value>{st[0]};
            })[0];
        Value next = arith::SelectOp::create(
            lb, take, arith::AddIOp::create(lb, st[1], one), st[1]);
        return SmallVector<Value>{updated, next};
      });
}

/// Scores cand[0..count) into `scores` when `needed`.
static Value scoreCandidates(ImplicitLocOpBuilder &b, Value needed, Value cand,
                             Value count, Value scores,
                             const ScoreOperands &operands,
                             const QuerySite &site, const ChildLevel &level) {
  Value zero = indexConst(b, 0);
  return buildIf(
      b, needed, {scores.getType()},
      [&](ImplicitLocOpBuilder &tb) {
        return buildLoop(
            tb, zero, count, {scores},
            [&](ImplicitLocOpBuilder &lb, Value a, ValueRange st) {
              Value node = extractIndex(lb, cand, {a});
              Value u = buildGroupScore(lb, operands, site, level, node);
              return SmallVector<Value>{
                  tensor::InsertOp::create(lb, u, st[0], a).getResult()};
            });
      },
      [&](ImplicitLocOpBuilder &) { return SmallVector<Value>{scores}; })[0];
}

namespace {

//===----------------------------------------------------------------------===//
// pisa.lse_score
//===----------------------------------------------------------------------===//

struct LseScoreToLoops : OpRewritePattern<LseScoreOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LseScoreOp op,
                                PatternRewriter &rewriter) const override {
    ArrayRef<int64_t> q = op.getQueries().getType().getShape();
    ArrayRef<int64_t> c = op.getChildren().getType().getShape();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    SmallVector<Value> s;
    for (int64_t i = 0; i < 4; ++i)
      s.push_back(dimOf(b, op.getCandidates(), i));

    ScoredLevel scored =
        scoredLevel(op.getLevel(), op.getBlockSize(), op.getBranching());
    ScoreOperands operands{op.getQueries(), op.getChildren(), q[1] / c[1], q[3],
                           op.getScaleOrDefault()};
    ChildLevel childLevel{indexConst(b, 0), dimOf(b, op.getChildren(), 2),
                          indexConst(b, scored.fanout),
                          indexConst(b, scored.keysPerChild)};

    Value zero = indexConst(b, 0);
    Value negInf = f32Const(b, -std::numeric_limits<float>::infinity());
    Value init = emptyLike(b, op.getScores().getType(), s);
    auto loopOver = [&](ImplicitLocOpBuilder &lb, Value extent, Value acc,
                        LoopBody body) {
      return buildLoop(lb, zero, extent, {acc}, body);
    };
    auto result = loopOver(
        b, s[0], init, [&](ImplicitLocOpBuilder &b0, Value bi, ValueRange a0) {
          return loopOver(
              b0, s[1], a0[0],
              [&](ImplicitLocOpBuilder &b1, Value kv, ValueRange a1) {
                return loopOver(
                    b1, s[2], a1[0],
                    [&](ImplicitLocOpBuilder &b2, Value i, ValueRange a2) {
                      Value t =
                          arith::AddIOp::create(b2, op.getQueryOffset(), i);
                      QuerySite site{bi, kv, i, t};
                      return loopOver(
                          b2, s[3], a2[0],
                          [&](ImplicitLocOpBuilder &b3, Value j,
                              ValueRange a3) {
                            Value raw = tensor::ExtractOp::create(
                                b3, op.getCandidates(),
                                ValueRange{bi, kv, i, j});
                            Value valid = arith::CmpIOp::create(
                                b3, arith::CmpIPredicate::sge, raw,
                                arith::ConstantIntOp::create(b3, 0, 32));
                            Value u = buildIf(
                                b3, valid, {b3.getF32Type()},
                                [&](ImplicitLocOpBuilder &tb) {
                                  Value node = arith::IndexCastOp::create(
                                      tb, tb.getIndexType(), raw);
                                  return SmallVector<Value>{buildGroupScore(
                                      tb, operands, site, childLevel, node)};
                                },
                                [&](ImplicitLocOpBuilder &) {
                                  return SmallVector<Value>{negInf};
                                })[0];
                            return SmallVector<Value>{
                                tensor::InsertOp::create(
                                    b3, u, a3[0], ValueRange{bi, kv, i, j})
                                    .getResult()};
                          });
                    });
              });
        });
    rewriter.replaceOp(op, result[0]);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// pisa.hier_topk
//===----------------------------------------------------------------------===//

struct HierTopKToLoops : OpRewritePattern<HierTopKOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(HierTopKOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getTokenMajor())
      return rewriter.notifyMatchFailure(op, "token-major: transposed first");
    // Heads, d and K are static (the verifier checks); B, N and Nq may not
    // be, and the pyramid layout then comes from N at run time.
    ArrayRef<int64_t> q = op.getQueries().getType().getShape();
    ArrayRef<int64_t> k = op.getKeys().getType().getShape();
    const int64_t numKv = k[1];
    const int64_t topK = op.getTopk(), fan = op.getBranching();
    const int64_t blockSize = op.getBlockSize();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value numBatch = dimOf(b, op.getQueries(), 0);
    Value numQueries = dimOf(b, op.getQueries(), 2);
    Value numKeys = dimOf(b, op.getKeys(), 2);
    LayoutTables layout = buildLayoutTables(b, numKeys, blockSize, fan);
    // A cache (pisa.pyramid_append) keeps its levels where its capacity's
    // layout puts them; sizes and spans are those of the N keys.
    Value offsets = layout.offsets;
    if (std::optional<uint64_t> capacity = op.getCapacity())
      offsets = buildLayoutTables(b, indexConst(b, int64_t(*capacity)),
                                  blockSize, fan)
                    .offsets;

    float scale = op.getScaleOrDefault();
    ScoreOperands summaries{op.getQueries(), op.getPyramid(), q[1] / k[1], q[3],
                            scale};
    ScoreOperands rawKeys{op.getQueries(), op.getKeys(), q[1] / k[1], q[3],
                          scale};
    Value spans = layout.spans, sizes = layout.sizes;

    Value zero = indexConst(b, 0), one = indexConst(b, 1);
    Value two = indexConst(b, 2);
    Value cK = indexConst(b, topK), cFan = indexConst(b, fan);
    Value cBlock = indexConst(b, blockSize);
    Value lastLeaf = arith::SubIOp::create(
        b, arith::MaxUIOp::create(b, layout.numLeaves, one), one);
    Value numLevels = layout.numLevels;

    Value out = emptyLike(b, op.getSelection().getType(),
                          {numBatch, indexConst(b, numKv), numQueries, cK});
    Value cand = tensor::EmptyOp::create(b, {fan * topK}, b.getI32Type());
    Value kept = tensor::EmptyOp::create(b, {topK}, b.getI32Type());
    Value scores = tensor::EmptyOp::create(b, {fan * topK}, b.getF32Type());

    auto perQuery = [&](ImplicitLocOpBuilder &qb, Value bi, Value kv, Value i,
                        ValueRange st) -> SmallVector<Value> {
      Value outAcc = st[0], candAcc = st[1], keptAcc = st[2], scoreAcc = st[3];
      Value t = arith::AddIOp::create(qb, op.getQueryOffset(), i);
      QuerySite site{bi, kv, i, t};
      // b_t, clamped so that a position past the keys cannot index past the
      // leaves (the tools reject such positions).
      Value bt = arith::MinUIOp::create(
          qb, arith::DivUIOp::create(qb, t, cBlock), lastLeaf);

      // A = {root}, then walk levels L .. 2.
      candAcc = insertIndex(qb, zero, candAcc, {zero});
      auto walked = buildLoop(
          qb, zero, arith::SubIOp::create(qb, numLevels, one),
          {candAcc, one, keptAcc, scoreAcc},
          [&](ImplicitLocOpBuilder &lb, Value j, ValueRange ls) {
            Value level = arith::SubIOp::create(lb, numLevels, j);
            Value child = arith::SubIOp::create(lb, level, one);
            Value span = tensor::ExtractOp::create(lb, spans, level);
            auto causal = compact(
                lb, ls[0], ls[1], [&](ImplicitLocOpBuilder &cb, Value node) {
                  Value firstLeaf = arith::MulIOp::create(cb, node, span);
                  return cmp(cb, arith::CmpIPredicate::ule, firstLeaf, bt);
                });
            Value numChildren = tensor::ExtractOp::create(lb, sizes, child);
            ChildLevel childLevel{
                tensor::ExtractOp::create(lb, offsets, child), numChildren,
                cFan,
                arith::MulIOp::create(
                    lb, tensor::ExtractOp::create(lb, spans, child), cBlock)};
            Value ranked = cmp(lb, arith::CmpIPredicate::ugt, causal[1], cK);
            Value scored = scoreCandidates(lb, ranked, causal[0], causal[1],
                                           ls[3], summaries, site, childLevel);
            auto best =
                selectBest(lb, causal[0], scored, causal[1], cK, ranked, ls[2]);
            // A = the existing children of the kept nodes, ascending.
            auto expanded = buildLoop(
                lb, zero, best[1], {causal[0], zero},
                [&](ImplicitLocOpBuilder &eb, Value p, ValueRange es) {
                  Value parent = extractIndex(eb, best[0], {p});
                  Value firstChild = arith::MulIOp::create(eb, parent, cFan);
                  return appendChildren(eb, es, firstChild, cFan, numChildren);
                });
            return SmallVector<Value>{expanded[0], expanded[1], best[0],
                                      scored};
          });

      // Leaves: forced F = {0, b_t - 1, b_t} within 0..b_t; the others of V
      // compete for the remaining K - |F| slots.
      Value btMinus1 = previousBlock(qb, bt);
      auto others = compact(qb, walked[0], walked[1],
                            [&](ImplicitLocOpBuilder &cb, Value node) {
                              return isLeafContender(cb, node, bt, btMinus1);
                            });
      Value hasBt = cmp(qb, arith::CmpIPredicate::uge, bt, one);
      Value hasBtMinus1 = cmp(qb, arith::CmpIPredicate::uge, bt, two);
      Value numForced = forcedBlockCount(qb, bt);
      Value slots = arith::SubIOp::create(qb, cK, numForced);
      ChildLevel keyLevel{zero, numKeys, cBlock, one};
      Value ranked = cmp(qb, arith::CmpIPredicate::ugt, others[1], slots);
      Value scored = scoreCandidates(qb, ranked, others[0], others[1],
                                     walked[3], rawKeys, site, keyLevel);
      auto best = selectBest(qb, others[0], scored, others[1], slots, ranked,
                             walked[2]);

      // Append the forced blocks, then write the set ascending, padded -1.
      Value sel = insertIndex(qb, zero, best[0], {best[1]});
      Value pos = arith::AddIOp::create(qb, best[1], one);
      sel = appendIf(qb, hasBt, bt, sel, pos);
      pos = arith::SelectOp::create(qb, hasBt,
                                    arith::AddIOp::create(qb, pos, one), pos);
      sel = appendIf(qb, hasBtMinus1, btMinus1, sel, pos);
      Value numSel = arith::AddIOp::create(qb, best[1], numForced);
      outAcc = writeSorted(qb, sel, numSel, cK, outAcc, {bi, kv, i});
      return {outAcc, walked[0], sel, scored};
    };

    auto loopOver = [&](ImplicitLocOpBuilder &lb, Value extent, ValueRange acc,
                        LoopBody body) {
      return buildLoop(lb, zero, extent, acc, body);
    };
    auto result =
        loopOver(b, numBatch, {out, cand, kept, scores},
                 [&](ImplicitLocOpBuilder &b0, Value bi, ValueRange a0) {
                   return loopOver(
                       b0, indexConst(b0, numKv), a0,
                       [&](ImplicitLocOpBuilder &b1, Value kv, ValueRange a1) {
                         return loopOver(b1, numQueries, a1,
                                         [&](ImplicitLocOpBuilder &b2, Value i,
                                             ValueRange a2) {
                                           return perQuery(b2, bi, kv, i, a2);
                                         });
                       });
                 });
    rewriter.replaceOp(op, result[0]);
    return success();
  }

private:
  /// Appends children firstChild .. firstChild + fan - 1 that exist to the
  /// candidate list state {cand, count}.
  static SmallVector<Value> appendChildren(ImplicitLocOpBuilder &b,
                                           ValueRange st, Value firstChild,
                                           Value fan, Value numChildren) {
    Value zero = indexConst(b, 0), one = indexConst(b, 1);
    return buildLoop(
        b, zero, fan, {st[0], st[1]},
        [&](ImplicitLocOpBuilder &lb, Value c, ValueRange cs) {
          Value child = arith::AddIOp::create(lb, firstChild, c);
          Value exists = cmp(lb, arith::CmpIPredicate::ult, child, numChildren);
          Value updated = insertIndex(lb, child, cs[0], {cs[1]});
          Value next = arith::SelectOp::create(
              lb, exists, arith::AddIOp::create(lb, cs[1], one), cs[1]);
          return SmallVector<Value>{updated, next};
        });
  }

  static Value appendIf(ImplicitLocOpBuilder &b, Value cond, Value node,
                        Value sel, Value pos) {
    return buildIf(
        b, cond, {sel.getType()},
        [&](ImplicitLocOpBuilder &tb) {
          return SmallVector<Value>{insertIndex(tb, node, sel, {pos})};
        },
        [&](ImplicitLocOpBuilder &) { return SmallVector<Value>{sel}; })[0];
  }

  /// out[prefix..., rank(x)] = x for the distinct x in sel[0..n), then -1.
  static Value writeSorted(ImplicitLocOpBuilder &b, Value sel, Value n, Value k,
                           Value out, ValueRange prefix) {
    Value zero = indexConst(b, 0), one = indexConst(b, 1);
    auto written = buildLoop(
        b, zero, n, {out},
        [&](ImplicitLocOpBuilder &lb, Value p, ValueRange st) {
          Value x = tensor::ExtractOp::create(lb, sel, p);
          auto rank = buildLoop(
              lb, zero, n, {zero},
              [&](ImplicitLocOpBuilder &rb, Value o, ValueRange r) {
                Value y = tensor::ExtractOp::create(rb, sel, o);
                Value less =
                    arith::CmpIOp::create(rb, arith::CmpIPredicate::slt, y, x);
                return SmallVector<Value>{arith::SelectOp::create(
                    rb, less, arith::AddIOp::create(rb, r[0], one), r[0])};
              });
          SmallVector<Value> idx(prefix);
          idx.push_back(rank[0]);
          return SmallVector<Value>{
              tensor::InsertOp::create(lb, x, st[0], idx).getResult()};
        });
    Value pad = arith::ConstantIntOp::create(b, -1, 32);
    auto padded = buildLoop(
        b, n, k, written,
        [&](ImplicitLocOpBuilder &lb, Value p, ValueRange st) {
          SmallVector<Value> idx(prefix);
          idx.push_back(p);
          return SmallVector<Value>{
              tensor::InsertOp::create(lb, pad, st[0], idx).getResult()};
        });
    return padded[0];
  }
};

} // namespace

void mlir::pisa::populateSelectionToLoopsPatterns(RewritePatternSet &patterns) {
  patterns.add<LseScoreToLoops, HierTopKToLoops>(patterns.getContext());
}
