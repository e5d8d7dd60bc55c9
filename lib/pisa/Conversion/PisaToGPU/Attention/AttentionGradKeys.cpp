//===- AttentionGradKeys.cpp - dk and dv of sparse attention --------------===//
//
// pisa.kernel.sparse_attention_grad_keys: a kernel zeroes the query bits,
// one thread per (query, batch x KV head) sets bit i of every block query
// i attends (both in QueryBits.cpp), and one block per (key block, segment
// of its queries, batch x KV head) stages the block's keys and values and
// walks its segment's set bits in query order, 64 head rows (64 / R
// queries) a step:
//
//   S = Q K^T, dP = dO V^T, P and dS as for dq
//   dV += P^T dO, dK += dS^T Q
//
// either with dK and dV in registers (the register key kernel: each warp
// owns 16 keys, the products transposed so that the keys are the mma rows,
// WarpMma.h) or staged through shared memory (P and dS stored transposed,
// warps split dv and d); then the block's segments add their sums in a
// fixed order (addInOrder): the result does not depend on when each block
// runs.
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionGrad.h"
#include "Attention/AttentionSteps.h"
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

namespace {

/// The key kernel's body: block x = (key block, segment), y = batch x KV
/// head.
class KeyGradBlock {
public:
  /// A step over n queries of the list from `first`, carrying `state`.
  using StepFn = llvm::function_ref<SmallVector<Value>(
      ImplicitLocOpBuilder &, Value first, Value n, ValueRange state)>;

  KeyGradBlock(ImplicitLocOpBuilder &b, const Kernel &e,
               const KeyGradPlan &plan, int64_t G, int64_t kvHeads, float scale)
      : e(e), p(plan), G(G), scale(scale) {
    elem = cast<MemRefType>(e.arg("queries").getType()).getElementType();
    SharedTiles shared(b);
    const int64_t R = p.rows.rows, c = p.blockSize;
    Type f32 = b.getF32Type(), i32 = b.getI32Type();
    kTile = shared.view(b, p.key, {c, p.headDim + 8}, elem);
    vTile = shared.view(b, p.value, {c, p.valueDim + 8}, elem);
    qTile = shared.view(b, p.query, {R, p.headDim + 8}, elem);
    doTile = shared.view(b, p.gradOut, {R, p.valueDim + 8}, elem);
    if (p.inRegisters) {
      rowShift = shared.view(b, p.rowShift, {R}, f32);
      rowDelta = shared.view(b, p.rowDelta, {R}, f32);
      rowVisible = shared.view(b, p.rowVisible, {R}, i32);
    } else {
      sTile = shared.view(b, p.score, {R, c + 4}, f32);
      dpTile = shared.view(b, p.gradProb, {R, c + 4}, f32);
      pT = shared.view(b, p.probT, {c, R + 8}, elem);
      dsT = shared.view(b, p.gradScoreT, {c, R + 8}, elem);
    }
    dkTile = shared.view(b, p.gradKey, {c, p.headDim + 4}, f32);
    dvTile = shared.view(b, p.gradValue, {c, p.valueDim + 4}, f32);
    list = shared.view(b, p.list, {p.listCapacity}, i32);
    listCount = shared.view(b, p.listCount, {1}, i32);
    Value segments = e.arg("segments");
    block = arith::DivUIOp::create(b, blockIdX(b), segments);
    // Rank r of the block's segments runs segment S - 1 - r: the chain in
    // which they add their sums (addInOrder) starts at the last segment,
    // whose queries attend the block least often (the selection favours a
    // query's own and recent blocks), and ends at the first that can hold
    // a query, which writes the result.
    rank = arith::RemUIOp::create(b, blockIdX(b), segments);
    Value lastIndex = arith::SubIOp::create(b, segments, indexConst(b, 1));
    segment = arith::SubIOp::create(b, lastIndex, rank);
    batch = arith::DivUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
    kv = arith::RemUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
    tid = threadIdX(b);
    warp = arith::DivUIOp::create(b, tid, indexConst(b, 32));
    lane = arith::RemUIOp::create(b, tid, indexConst(b, 32));
    firstHead = arith::MulIOp::create(b, kv, indexConst(b, G));
    Value offset;
    if (e.has("cuSeqlensQ")) {
      locatePackedBlock(b);
      offset = packedOffset;
    } else {
      numKeys = dimOf(b, e.arg("keys"), 2);
      firstKey = arith::MulIOp::create(b, block, indexConst(b, c));
      offset = e.arg("queryOffset");
      queryShift = offset;
    }
    numWords = arith::SubIOp::create(b, dimOf(b, e.arg("queryBits"), 3),
                                     indexConst(b, 1));
    // A packed block's segments split its sequence's words (from wordBase
    // to endQueryWord), so that every segment takes part however long the
    // batch.
    Value segmentedWords = numWords;
    if (queryBase) {
      wordBase = arith::DivUIOp::create(b, queryBase, indexConst(b, 32));
      segmentedWords = arith::SubIOp::create(b, endQueryWord, wordBase);
    }
    wordsPerSegment = arith::CeilDivUIOp::create(b, segmentedWords, segments);
    if (queryBase)
      wordsPerSegment =
          arith::MaxUIOp::create(b, wordsPerSegment, indexConst(b, 1));
    // Queries before the block's first key cannot attend it: the segments
    // wholly before its first word take no part (the last segment does, so
    // that a block no query can attend still gets its zeros written).
    Value firstQuery = arith::SelectOp::create(
        b, cmp(b, P::ugt, firstKey, offset),
        arith::SubIOp::create(b, firstKey, offset), indexConst(b, 0));
    if (queryBase)
      firstQuery = arith::AddIOp::create(b, queryBase, firstQuery);
    firstWord = arith::DivUIOp::create(b, firstQuery, indexConst(b, 32));
    Value firstSegment = arith::MinUIOp::create(
        b,
        arith::DivUIOp::create(b, fromWordBase(b, firstWord), wordsPerSegment),
        lastIndex);
    takesPart = cmp(b, P::uge, segment, firstSegment);
    lastSegment = cmp(b, P::eq, segment, firstSegment);
    chainRank = rank;
    if (queryBase) {
      // A packed block's queries end at its sequence's last word: the
      // segments after it take no part, and the chain starts at the last
      // one that does (at least the first, for the zeros).
      Value endWord = arith::MaxUIOp::create(
          b, endQueryWord,
          arith::AddIOp::create(b, firstWord, indexConst(b, 1)));
      Value topSegment = arith::MinUIOp::create(
          b,
          arith::MaxUIOp::create(
              b,
              arith::DivUIOp::create(
                  b,
                  fromWordBase(
                      b, arith::SubIOp::create(b, endWord, indexConst(b, 1))),
                  wordsPerSegment),
              firstSegment),
          lastIndex);
      takesPart = arith::AndIOp::create(
          b,
          arith::AndIOp::create(b, takesPart,
                                cmp(b, P::ule, segment, topSegment)),
          realBlock);
      chainRank = arith::SubIOp::create(b, topSegment, segment);
    }
  }

  void build(ImplicitLocOpBuilder &b) {
    const int64_t c = p.blockSize;
    if (brokenBatch)
      writeBrokenRows(b);
    buildIfThen(b, takesPart, [&](ImplicitLocOpBuilder &tb) {
      // Rows past the sequence's keys (the next one's, or zeros past the
      // buffer) are masked per query.
      Value firstRow = keyRow(tb, firstKey);
      stageKeyRows(tb, e.arg("keys"), batch, kv, firstRow, c, p.headDim, kTile,
                   tid, kGradThreads);
      stageKeyRows(tb, e.arg("values"), batch, kv, firstRow, c, p.valueDim,
                   vTile, tid, kGradThreads);
      if (p.inRegisters) {
        SmallVector<Value> sums = forEachStep(
            tb, zeroSums(tb),
            [&](ImplicitLocOpBuilder &sb, Value first, Value n, ValueRange st) {
              return registerStep(sb, first, n, st);
            });
        gpu::BarrierOp::create(tb); // the 16-bit tiles are read
        storeSums(tb, sums);
      } else {
        RowSite site(tb, p.rows, tid, firstHead, G);
        zeroTile(tb, dkTile, c * (p.headDim + 4));
        zeroTile(tb, dvTile, c * (p.valueDim + 4));
        forEachStep(tb, ValueRange{},
                    [&](ImplicitLocOpBuilder &sb, Value first, Value n,
                        ValueRange) -> SmallVector<Value> {
                      stagedStep(sb, site, first, n);
                      return {};
                    });
      }
      gpu::BarrierOp::create(tb); // the last products are in dK and dV
      addInOrder(tb);
    });
    gpu::ReturnOp::create(b);
  }

private:
  /// Bit word `word` counted from the block's first segment's first word
  /// (wordBase; 0 for a batch), and back.
  Value fromWordBase(ImplicitLocOpBuilder &b, Value word) const {
    return wordBase ? arith::SubIOp::create(b, word, wordBase).getResult()
                    : word;
  }
  Value toWordBase(ImplicitLocOpBuilder &b, Value word) const {
    return wordBase ? arith::AddIOp::create(b, word, wordBase).getResult()
                    : word;
  }

  /// Key `key` of the block's sequence as a row of the keys.
  Value keyRow(ImplicitLocOpBuilder &b, Value key) const {
    return keyBase ? arith::AddIOp::create(b, keyBase, key).getResult() : key;
  }

  /// A packed batch: block x's key block is a block slot of the batch
  /// (sequence s's blocks from floor(cu_k[s] / C) + s, as the mark kernel
  /// numbers them). Finds its sequence (a binary search of the first
  /// slots), its keys and queries, and whether the slot is one of its
  /// blocks in a batch that keeps the rules.
  void locatePackedBlock(ImplicitLocOpBuilder &b) {
    const int64_t c = p.blockSize;
    Value cuQ = e.arg("cuSeqlensQ"), cuK = e.arg("cuSeqlensK");
    Value one = indexConst(b, 1), zero = indexConst(b, 0);
    Value numKeyRows = dimOf(b, e.arg("keys"), 2);
    Value numSeqs = arith::SubIOp::create(b, dimOf(b, cuK, 0), one);
    auto firstSlot = [&](ImplicitLocOpBuilder &lb, Value seq) {
      return firstNodeSlot(lb, cuEntry(lb, cuK, seq), seq, c,
                           indexConst(lb, 1));
    };
    Value seq = findSequence(b, numSeqs, block, firstSlot);
    PackedKeys keys = packedKeys(b, cuK, numKeyRows, seq);
    Value q0 = cuEntry(b, cuQ, seq);
    Value q1 = cuEntry(b, cuQ, arith::AddIOp::create(b, seq, one));
    Value valid = arith::AndIOp::create(
        b,
        batchRulesHold(b, cuK, numKeyRows, cuQ, dimOf(b, e.arg("queries"), 2)),
        keys.valid);
    numKeys = arith::SelectOp::create(b, valid, keys.count, zero);
    keyBase = arith::SelectOp::create(b, valid, keys.first, zero);
    firstKey = arith::MulIOp::create(
        b, arith::SubIOp::create(b, block, firstSlot(b, seq)),
        indexConst(b, c));
    realBlock = arith::AndIOp::create(
        b, valid,
        arith::AndIOp::create(b, cmp(b, P::uge, block, firstSlot(b, seq)),
                              cmp(b, P::ult, firstKey, numKeys)));
    brokenBatch =
        arith::XOrIOp::create(b, valid, arith::ConstantIntOp::create(b, 1, 1));
    // Position of query row r: N_s - Nq_s + (r - cu_q[s]).
    Value numQueries = arith::SubIOp::create(b, q1, q0);
    packedOffset = arith::SubIOp::create(b, numKeys, numQueries);
    queryBase = q0;
    queryShift = arith::SubIOp::create(b, packedOffset, q0);
    endQueryWord = arith::CeilDivUIOp::create(b, q1, indexConst(b, 32));
  }

  /// A packed batch whose cu_seqlens break the rules: block x's first
  /// segment writes NaN to dk and dv rows [x C, x C + C) (the slots cover
  /// the Tk rows), so that no row of such a call holds a plausible value.
  void writeBrokenRows(ImplicitLocOpBuilder &b) {
    const int64_t c = p.blockSize;
    Value numKeyRows = dimOf(b, e.arg("keys"), 2);
    buildIfThen(
        b,
        arith::AndIOp::create(b, brokenBatch,
                              cmp(b, P::eq, rank, indexConst(b, 0))),
        [&](ImplicitLocOpBuilder &wb) {
          Value nan = f32Const(wb, std::numeric_limits<float>::quiet_NaN());
          Value row0 = arith::MulIOp::create(wb, block, indexConst(wb, c));
          for (const std::pair<StringRef, int64_t> &target :
               {std::pair<StringRef, int64_t>{"gradKeys", p.headDim},
                {"gradValues", p.valueDim}}) {
            const int64_t width = target.second;
            Value out = e.arg(target.first);
            Type elem = cast<MemRefType>(out.getType()).getElementType();
            Value value =
                elem.isF32()
                    ? nan
                    : arith::TruncFOp::create(wb, elem, nan).getResult();
            buildLoop(
                wb, tid, indexConst(wb, c * width),
                indexConst(wb, kGradThreads), ValueRange{},
                [&](ImplicitLocOpBuilder &lb, Value i,
                    ValueRange) -> SmallVector<Value> {
                  Value row = arith::AddIOp::create(
                      lb, row0,
                      arith::DivUIOp::create(lb, i, indexConst(lb, width)));
                  Value col =
                      arith::RemUIOp::create(lb, i, indexConst(lb, width));
                  buildIfThen(lb, cmp(lb, P::ult, row, numKeyRows),
                              [&](ImplicitLocOpBuilder &sb) {
                                memref::StoreOp::create(
                                    sb, value, out,
                                    ValueRange{batch, kv, row, col});
                              });
                  return {};
                });
          }
        });
  }

  /// Zeroes `elems` f32 of a tile (a multiple of 4), 16 bytes a thread.
  void zeroTile(ImplicitLocOpBuilder &b, Value tile, int64_t elems) {
    auto type = cast<MemRefType>(tile.getType());
    const int64_t stride = type.getShape()[1];
    Value zeros = f32Splat(b, VectorType::get({4}, b.getF32Type()), 0.0f);
    buildLoop(b, tid, indexConst(b, elems / 4), indexConst(b, kGradThreads),
              ValueRange{},
              [&](ImplicitLocOpBuilder &lb, Value i,
                  ValueRange) -> SmallVector<Value> {
                Value at = arith::MulIOp::create(lb, i, indexConst(lb, 4));
                Value r =
                    arith::DivUIOp::create(lb, at, indexConst(lb, stride));
                Value col =
                    arith::RemUIOp::create(lb, at, indexConst(lb, stride));
                storeRow(lb, zeros, tile, {r, col});
                return {};
              });
  }

  /// The bit words of this segment: the block's row split into `segments`
  /// equal ranges, less the words before the block's first word.
  std::pair<Value, Value> segmentWords(ImplicitLocOpBuilder &b) {
    Value begin = arith::MinUIOp::create(
        b, toWordBase(b, arith::MulIOp::create(b, segment, wordsPerSegment)),
        numWords);
    Value end = arith::MinUIOp::create(
        b, arith::AddIOp::create(b, begin, wordsPerSegment), numWords);
    if (endQueryWord)
      end = arith::MinUIOp::create(b, end, endQueryWord);
    begin = arith::MinUIOp::create(
        b, arith::MaxUIOp::create(b, begin, firstWord), end);
    return {begin, end};
  }

  /// Runs `step` over the segment's queries (its set bits, in index
  /// order), rows.tokens at a time and then the rest, carrying `init`.
  /// The words are read windowWords at a time: their queries are appended
  /// to the list after those left from the last window, the full steps
  /// run, and what is left moves to the list's front.
  SmallVector<Value> forEachStep(ImplicitLocOpBuilder &b, ValueRange init,
                                 StepFn step) {
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
          Value full =
              arith::DivUIOp::create(lb, count, indexConst(lb, tokens));
          SmallVector<Value> state = buildLoop(
              lb, indexConst(lb, 0), full, st.drop_back(),
              [&](ImplicitLocOpBuilder &sb, Value s, ValueRange inner) {
                return step(
                    sb, arith::MulIOp::create(sb, s, indexConst(sb, tokens)),
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
        b, cmp(b, P::ugt, pending, indexConst(b, 0)),
        ValueRange(out).getTypes(),
        [&](ImplicitLocOpBuilder &tb) {
          gpu::BarrierOp::create(tb); // the list's front is written
          return step(tb, indexConst(tb, 0), pending, out);
        },
        [&](ImplicitLocOpBuilder &) { return out; });
  }

  /// Warp 0 appends the queries of words [w0, min(w0 + windowWords, end)) to
  /// the list after its first `pending`, lane l those of word w0 + l at its
  /// prefix count, and writes the list's new length.
  void appendWindow(ImplicitLocOpBuilder &b, Value w0, Value end,
                    Value pending) {
    Type i32 = b.getI32Type();
    buildIfThen(
        b, cmp(b, P::eq, warp, indexConst(b, 0)),
        [&](ImplicitLocOpBuilder &wb) {
          Value w = arith::AddIOp::create(wb, w0, lane);
          Value inWindow = arith::AndIOp::create(
              wb, cmp(wb, P::ult, w, end),
              cmp(wb, P::ult, lane, indexConst(wb, p.windowWords)));
          Value word = buildIf(
              wb, inWindow, TypeRange{i32},
              [&](ImplicitLocOpBuilder &tb) -> SmallVector<Value> {
                return {memref::LoadOp::create(
                    tb, e.arg("queryBits"), ValueRange{batch, kv, block, w})};
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
                arith::SelectOp::create(
                    wb, has, below, arith::ConstantIntOp::create(wb, 0, 32)));
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
                    cb, P::ne, args[0],
                    arith::ConstantIntOp::create(cb, 0, 32));
                scf::ConditionOp::create(cb, more, args);
              },
              [&](OpBuilder &ob, Location loc, ValueRange args) {
                ImplicitLocOpBuilder lb(loc, ob);
                Value bit = math::CountTrailingZerosOp::create(lb, args[0]);
                Value query =
                    arith::AddIOp::create(lb, first, toIndex(lb, bit));
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

  /// Slot s of a step from list entry `first`: its query (query 0, in
  /// bounds, for a slot past n) and whether it holds one.
  Value holds(ImplicitLocOpBuilder &b, Value slot, Value n) {
    return cmp(b, P::ult, slot, n);
  }
  Value slotQuery(ImplicitLocOpBuilder &b, Value first, Value slot, Value n) {
    Value at = arith::MinUIOp::create(b, arith::AddIOp::create(b, first, slot),
                                      indexConst(b, p.listCapacity - 1));
    Value q = toIndex(b, memref::LoadOp::create(b, list, at));
    return arith::SelectOp::create(b, holds(b, slot, n), q, indexConst(b, 0));
  }

  /// The step's head rows of q and dO into their tiles.
  void stageStepRows(ImplicitLocOpBuilder &b, Value first, Value n) {
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
                  {e.arg("gradOutput"), batch, firstHead, G,
                   p.rows.rowsPerToken, token, holdsOne},
                  R, p.valueDim, doTile, tid, kGradThreads);
  }

  /// The staged step over n queries from list entry `first`: stage their
  /// head rows, S and dP, P and dS transposed, dV += P^T dO and dK += dS^T
  /// Q, all through shared memory.
  void stagedStep(ImplicitLocOpBuilder &b, const RowSite &site, Value first,
                  Value n) {
    const int64_t R = p.rows.rows, c = p.blockSize;
    Type f32 = b.getF32Type();
    stageStepRows(b, first, n);
    Value query = slotQuery(b, first, site.slot, n);
    Value isHead =
        arith::AndIOp::create(b, site.isHead, holds(b, site.slot, n));
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
    auto [probs, grads] = probabilityAndGradient(
        b, loadRow(b, sTile, {site.row, col0}, cols, f32),
        loadRow(b, dpTile, {site.row, col0}, cols, f32), visible, shift, delta,
        scale, cols);
    storeTransposed(b, probs, pT, col0, site.row);
    storeTransposed(b, grads, dsT, col0, site.row);
    gpu::BarrierOp::create(b);
    warpSplitColumnsAccumulate(b, pT, c, R, doTile, p.valueDim, dvTile, warp,
                               kGradWarps, 64 * 32);
    warpSplitColumnsAccumulate(b, dsT, c, R, qTile, p.headDim, dkTile, warp,
                               kGradWarps, 64 * 32);
    gpu::BarrierOp::create(b); // the tiles are read before the next gather
  }

  /// Row `row` of a [rows x C] f32 fragment (this thread's columns from
  /// col0) as column `row` of `tile` ([C x rows], 16-bit).
  void storeTransposed(ImplicitLocOpBuilder &b, Value values, Value tile,
                       Value col0, Value row) {
    const int64_t n = cast<VectorType>(values.getType()).getNumElements();
    Value narrow =
        arith::TruncFOp::create(b, VectorType::get({n}, elem), values);
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

  int64_t slabs() const { return p.blockSize / kMmaRows; }
  int64_t rowGroups() const { return kGradWarps / slabs(); }

  SmallVector<Value> zeroSums(ImplicitLocOpBuilder &b) {
    auto accType = VectorType::get({2, 2}, b.getF32Type());
    Value zero = arith::ConstantOp::create(b, accType, b.getZeroAttr(accType));
    return SmallVector<Value>((p.headDim + p.valueDim) / kMmaCols, zero);
  }

  /// Each step row's exponent shift (lse log2 e, +inf for rows without a
  /// query or head), D, and the number of the block's keys its query sees.
  void stageRowFacts(ImplicitLocOpBuilder &b, Value first, Value n) {
    const int64_t perToken = p.rows.rowsPerToken;
    buildIfThen(
        b, cmp(b, P::ult, tid, indexConst(b, p.rows.rows)),
        [&](ImplicitLocOpBuilder &rb) {
          Value slot =
              arith::DivUIOp::create(rb, tid, indexConst(rb, perToken));
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
              arith::AddIOp::create(
                  rb, arith::AddIOp::create(rb, queryShift, query),
                  indexConst(rb, 1)));
          Value visible = arith::SelectOp::create(
              rb, cmp(rb, P::ugt, keyEnd, firstKey),
              arith::SubIOp::create(rb, keyEnd, firstKey), indexConst(rb, 0));
          memref::StoreOp::create(rb, probabilityShift(rb, lse, isHead),
                                  rowShift, tid);
          memref::StoreOp::create(rb, delta, rowDelta, tid);
          memref::StoreOp::create(
              rb,
              toI32(rb, arith::MinUIOp::create(rb, visible,
                                               indexConst(rb, p.blockSize))),
              rowVisible, tid);
        });
  }

  /// The register step over n queries from list entry `first`; `sums` and
  /// the result are dK's n8 tiles, then dV's.
  SmallVector<Value> registerStep(ImplicitLocOpBuilder &b, Value first, Value n,
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

  /// One chunk of 16 step rows from `row0` against the warp's keys from
  /// `key0`, accumulated into `sums`.
  void chunk(ImplicitLocOpBuilder &b, Value key0, Value row0,
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
      sums[kTiles + t] = frags.accumulateKN(b, pA, doTile, row0, t * kMmaCols,
                                            sums[kTiles + t]);
  }

  /// The lanes' sums into the dk and dv tiles, the row groups in order.
  void storeSums(ImplicitLocOpBuilder &b, ArrayRef<Value> sums) {
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
  /// The segments of a key block add their sums in rank order, so that the
  /// result does not depend on when each runs: rank r waits until the
  /// block's counter (the last word of its bit row) reads r, adds its tiles
  /// to the f32 sums of the ranks before it (`accumulators`), and counts
  /// itself done; the last one writes dk = scale sum and dv.
  void addInOrder(ImplicitLocOpBuilder &b) {
    Value bits = e.arg("queryBits");
    Value counter =
        arith::SubIOp::create(b, dimOf(b, bits, 3), indexConst(b, 1));
    SmallVector<Value> at{batch, kv, block, counter};
    Value first = cmp(b, P::eq, chainRank, indexConst(b, 0));
    buildIfThen(b,
                arith::AndIOp::create(
                    b,
                    arith::XOrIOp::create(
                        b, first, arith::ConstantIntOp::create(b, 1, 1)),
                    cmp(b, P::eq, tid, indexConst(b, 0))),
                [&](ImplicitLocOpBuilder &wb) { waitFor(wb, bits, at); });
    gpu::BarrierOp::create(b);
    Value accumulators = e.arg("accumulators");
    addTile(b, dkTile, p.headDim, 0, first, e.arg("gradKeys"), scale,
            accumulators);
    addTile(b, dvTile, p.valueDim, p.headDim, first, e.arg("gradValues"), 1.0f,
            accumulators);
    // Every thread's sums are visible on the device before the counter
    // says so.
    NVVM::MembarOp::create(b, NVVM::MemScopeKind::GPU);
    gpu::BarrierOp::create(b);
    buildIfThen(
        b, cmp(b, P::eq, tid, indexConst(b, 0)), [&](ImplicitLocOpBuilder &wb) {
          memref::AtomicRMWOp::create(
              wb, arith::AtomicRMWKind::assign,
              toI32(wb,
                    arith::AddIOp::create(wb, chainRank, indexConst(wb, 1))),
              bits, at);
        });
  }

  /// Spins until the counter at `at` reads this segment's rank (an atomic
  /// read: a plain load could be hoisted out of the loop), then orders the
  /// reads after it.
  void waitFor(ImplicitLocOpBuilder &b, Value bits, ArrayRef<Value> at) {
    Type i32 = b.getI32Type();
    Value want = toI32(b, chainRank);
    scf::WhileOp::create(
        b, TypeRange{}, ValueRange{},
        [&](OpBuilder &ob, Location loc, ValueRange) {
          ImplicitLocOpBuilder cb(loc, ob);
          Value now = memref::AtomicRMWOp::create(
              cb, arith::AtomicRMWKind::addi,
              arith::ConstantIntOp::create(cb, 0, 32), bits, at);
          scf::ConditionOp::create(cb, cmp(cb, P::ne, now, want), ValueRange{});
        },
        [&](OpBuilder &ob, Location loc, ValueRange) {
          ImplicitLocOpBuilder lb(loc, ob);
          scf::YieldOp::create(lb);
        });
    (void)i32;
    NVVM::MembarOp::create(b, NVVM::MemScopeKind::GPU);
  }

  /// sum = tile (+ the accumulated sum unless this is the first rank) for
  /// the block's keys before N, 4 values a thread at a time; the last
  /// rank writes factor * sum to `out`, the others to the accumulators
  /// at columns [column0, column0 + width).
  void addTile(ImplicitLocOpBuilder &b, Value tile, int64_t width,
               int64_t column0, Value first, Value out, float factor,
               Value accumulators) {
    // Quads i0 + u threads, u < kAddUnroll, a thread at a time: their
    // loads of the earlier sums all issue before the first add (one load
    // waited for at a time made the chain of a block's segments the
    // backward's largest cost).
    constexpr int64_t kAddUnroll = 8;
    const int64_t total = p.blockSize * width / 4;
    Type f32 = b.getF32Type();
    auto quad = VectorType::get({4}, f32);
    Value lastKey = arith::SubIOp::create(b, numKeys, indexConst(b, 1));
    buildLoop(
        b, tid, indexConst(b, total), indexConst(b, kGradThreads * kAddUnroll),
        ValueRange{},
        [&](ImplicitLocOpBuilder &lb, Value i0,
            ValueRange) -> SmallVector<Value> {
          struct Quad {
            Value inTile, r, col, key, accCol;
          };
          SmallVector<Quad> quads;
          SmallVector<Value> own;
          for (int64_t u = 0; u < kAddUnroll; ++u) {
            Value i =
                arith::AddIOp::create(lb, i0, indexConst(lb, u * kGradThreads));
            Value at = arith::MinUIOp::create(lb, i, indexConst(lb, total - 1));
            Value r = arith::DivUIOp::create(lb, at, indexConst(lb, width / 4));
            Value col = arith::MulIOp::create(
                lb, arith::RemUIOp::create(lb, at, indexConst(lb, width / 4)),
                indexConst(lb, 4));
            Value key = arith::AddIOp::create(lb, firstKey, r);
            Value inTile = arith::AndIOp::create(
                lb, cmp(lb, P::ult, i, indexConst(lb, total)),
                cmp(lb, P::ult, key, numKeys));
            quads.push_back(
                {inTile, r, col, keyRow(lb, key),
                 arith::AddIOp::create(lb, col, indexConst(lb, column0))});
            own.push_back(loadRow(lb, tile, {r, col}, 4, f32));
          }
          SmallVector<Type> types(kAddUnroll, quad);
          SmallVector<Value> sums = buildIf(
              lb, first, types, [&](ImplicitLocOpBuilder &) { return own; },
              [&](ImplicitLocOpBuilder &ab) {
                // A quad past N reads the last key's sums (in bounds) and
                // is not stored.
                SmallVector<Value> before, added;
                for (const Quad &q : quads)
                  before.push_back(loadRow(
                      ab, accumulators,
                      {batch, kv,
                       arith::MinUIOp::create(ab, q.key, keyRow(ab, lastKey)),
                       q.accCol},
                      4, f32));
                for (auto [x, y] : llvm::zip(before, own))
                  added.push_back(arith::AddFOp::create(ab, x, y));
                return added;
              });
          for (size_t u = 0; u < quads.size(); ++u) {
            const Quad &q = quads[u];
            Value sum = sums[u];
            buildIfThen(lb, arith::AndIOp::create(lb, q.inTile, lastSegment),
                        [&](ImplicitLocOpBuilder &ob) {
                          Value v = arith::MulFOp::create(
                              ob, sum, f32Splat(ob, quad, factor));
                          storeRow(ob, toElementsOf(ob, v, out), out,
                                   {batch, kv, q.key, q.col});
                        });
            buildIfThen(lb,
                        arith::AndIOp::create(
                            lb, q.inTile,
                            arith::XOrIOp::create(
                                lb, lastSegment,
                                arith::ConstantIntOp::create(lb, 1, 1))),
                        [&](ImplicitLocOpBuilder &ob) {
                          storeRow(ob, sum, accumulators,
                                   {batch, kv, q.key, q.accCol});
                        });
          }
          return {};
        });
  }

  const Kernel &e;
  const KeyGradPlan &p;
  int64_t G;
  float scale;
  Type elem;
  Value kTile, vTile, qTile, doTile, sTile, dpTile, pT, dsT, rowShift, rowDelta,
      rowVisible, dkTile, dvTile, list, listCount;
  Value block, rank, segment, takesPart, lastSegment, numWords, wordsPerSegment,
      firstWord, batch, kv, tid, warp, lane, firstHead, numKeys, firstKey;
  /// The rank in the chain of the block's segments that take part.
  Value chainRank;
  /// Position of query row r: r + queryShift.
  Value queryShift;
  /// A packed batch's block (null for a batch): its sequence's first key
  /// row, whether the slot is one of its blocks, whether the batch breaks
  /// the rules, N_s - Nq_s, its first query row, the bit word after its
  /// last query, and the word its segments count from.
  Value keyBase, realBlock, brokenBatch, packedOffset, queryBase, endQueryWord,
      wordBase;
};

struct GradKeysToGPU : KernelOpPattern<SparseAttentionGradKeysKernelOp> {
  using KernelOpPattern::KernelOpPattern;

  void lower(SparseAttentionGradKeysKernelOp op, PatternRewriter &rewriter,
             ImplicitLocOpBuilder &host) const override {
    MemRefType qType = bufferType(op.getQueries());
    const int64_t kvHeads = bufferType(op.getKeys()).getShape()[1];
    const int64_t G = qType.getShape()[1] / kvHeads;
    const int64_t topK = bufferType(op.getSelection()).getShape()[3];
    KernelConfigAttr config = getKernelConfig(op);
    const KeyGradPlan plan(
        G, qType.getShape()[3], bufferType(op.getValues()).getShape()[3],
        op.getBlockSize(), config.getEpilogue() == KernelEpilogue::Registers);
    Value bits = op.getQueryBits();
    SmallVector<KernelOperand> markOperands{
        {"selection", op.getSelection()},
        {"keys", op.getKeys()},
        {"queryOffset", op.getQueryOffset()},
        {"bits", bits}};
    addPackedOperands(markOperands, op.getCuSeqlensQ(), op.getCuSeqlensK());
    // Segments of at least kMinSegmentWords words, at most kMaxKeySegments.
    Value rowWords =
        arith::SubIOp::create(host, dimOf(host, bits, 3), indexConst(host, 1));
    Value segments = arith::MaxUIOp::create(
        host,
        arith::MinUIOp::create(
            host,
            arith::CeilDivUIOp::create(host, rowWords,
                                       indexConst(host, kMinSegmentWords)),
            indexConst(host, kMaxKeySegments)),
        indexConst(host, 1));
    SmallVector<KernelOperand> operands{{"queries", op.getQueries()},
                                        {"keys", op.getKeys()},
                                        {"values", op.getValues()},
                                        {"queryOffset", op.getQueryOffset()},
                                        {"lse", op.getLse()},
                                        {"delta", op.getDelta()},
                                        {"gradOutput", op.getGradOutput()},
                                        {"queryBits", bits},
                                        {"gradKeys", op.getGradKeys()},
                                        {"gradValues", op.getGradValues()},
                                        {"accumulators", op.getAccumulators()},
                                        {"segments", segments}};
    addPackedOperands(operands, op.getCuSeqlensQ(), op.getCuSeqlensK());
    Kernel zero = buildZeroBits(rewriter, op, bits);
    Kernel mark = buildMarkQueries(rewriter, op, topK, markOperands);
    Kernel kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      kernel =
          createKernelFor(rewriter, op, "sparse_attention_grad_keys", operands);
      applyOccupancyHint(kernel.func(), config);
      ImplicitLocOpBuilder b(op.getLoc(), rewriter);
      KeyGradBlock(b, kernel, plan, G, kvHeads, op.getScale().convertToFloat())
          .build(b);
    }
    Value groups = arith::MulIOp::create(host, dimOf(host, op.getQueries(), 0),
                                         indexConst(host, kvHeads));
    Value words =
        arith::MulIOp::create(host, dimOf(host, bits, 2), dimOf(host, bits, 3));
    launch(host, zero,
           host.createOrFold<arith::CeilDivUIOp>(
               words, indexConst(host, kMarkThreads)),
           groups, kMarkThreads, {{"bits", bits}});
    launch(host, mark,
           host.createOrFold<arith::CeilDivUIOp>(
               dimOf(host, op.getQueries(), 2), indexConst(host, kMarkThreads)),
           groups, kMarkThreads, markOperands);
    Value gridX = arith::MulIOp::create(host, dimOf(host, bits, 2), segments);
    launch(host, kernel, gridX, groups, config.getThreads(), operands,
           plan.bytes);
  }
};

} // namespace

void mlir::pisa::detail::populateAttentionGradKeysPatterns(
    RewritePatternSet &patterns) {
  patterns.add<GradKeysToGPU>(patterns.getContext());
}
