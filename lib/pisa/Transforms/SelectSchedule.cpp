//===- SelectSchedule.cpp - Annotate hier_topk with its schedule ----------===//
//
// A decision pass: it reads shapes and attributes, applies the IO-cost model
// and attaches #pisa.schedule. It never rewrites the op otherwise.
//
//===----------------------------------------------------------------------===//

#include "pisa/Analysis/IOCostModel.h"
#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/IR/PisaOps.h"
#include "pisa/Transforms/Passes.h"

#include <cmath>
#include <sstream>

namespace mlir::pisa {
#define GEN_PASS_DEF_PISASELECTSCHEDULE
#include "pisa/Transforms/Passes.h.inc"
} // namespace mlir::pisa

using namespace mlir;
using namespace mlir::pisa;

namespace {
struct PisaSelectSchedulePass
    : public pisa::impl::PisaSelectScheduleBase<PisaSelectSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    if (qTile < 1 || qTile > kMaxQueryTile) {
      getOperation()->emitError() << "expected q-tile in [1, " << kMaxQueryTile
                                  << "] but got " << int64_t(qTile);
      return signalPassFailure();
    }
    WalkResult result = getOperation()->walk([&](Operation *op) {
      LogicalResult done = success();
      if (auto topk = dyn_cast<HierTopKOp>(op))
        done = annotate(topk);
      else if (auto varlen = dyn_cast<HierTopKVarlenOp>(op))
        done = annotate(varlen);
      return failed(done) ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  /// A packed varlen batch: the rule with Nq unknown (the queries per
  /// sequence vary per call), as for a batched op with dynamic Nq.
  LogicalResult annotate(HierTopKVarlenOp op) {
    if (keepExisting && op.getScheduleAttr())
      return success();
    RankedTensorType qType = op.getQueries().getType();
    RankedTensorType kType = op.getKeys().getType();
    return annotateOp(
        op, qType.getDimSize(1), kType.getDimSize(1), qType.getDimSize(2),
        qType.getElementType(), kType.getElementType(), op.getBlockSize(),
        ShapedType::kDynamic, ShapedType::kDynamic, op.getBranching(),
        op.getTopk(), [&](ScheduleAttr a) { op.setScheduleAttr(a); });
  }

  LogicalResult annotate(HierTopKOp op) {
    if (keepExisting && op.getScheduleAttr())
      return success();
    RankedTensorType qType = op.getQueries().getType();
    RankedTensorType kType = op.getKeys().getType();
    const unsigned heads = headDimIndex(op.getTokenMajor());
    const unsigned tokens = tokenDimIndex(op.getTokenMajor());
    return annotateOp(op, qType.getDimSize(heads), kType.getDimSize(heads),
                      qType.getDimSize(3), qType.getElementType(),
                      kType.getElementType(), op.getBlockSize(),
                      qType.getDimSize(tokens), kType.getDimSize(2),
                      op.getBranching(), op.getTopk(),
                      [&](ScheduleAttr a) { op.setScheduleAttr(a); });
  }

  /// Applies the IO-cost rule to a selection of these sizes (Nq, N:
  /// kDynamic when unknown) and records the schedule with `set`.
  LogicalResult annotateOp(Operation *op, int64_t hq, int64_t hkv, int64_t d,
                           Type qElem, Type kElem, int64_t blockSize,
                           int64_t nq, int64_t numKeys, int64_t branching,
                           int64_t topk,
                           llvm::function_ref<void(ScheduleAttr)> set) {
    if (ShapedType::isDynamic(hq) || ShapedType::isDynamic(hkv) ||
        ShapedType::isDynamic(d))
      return op->emitOpError()
             << "needs static Hq, Hkv and d to choose a schedule";

    IOCostInputs in;
    in.groupSize = hq / hkv;
    in.blockSize = blockSize;
    in.qTile = qTile;
    in.headDim = d;
    in.queryBytes = ceilBytes(qElem);
    in.keyBytes = ceilBytes(kElem);
    if (!ShapedType::isDynamic(nq))
      in.numQueries = nq;
    if (std::optional<std::string> error = validateIOCostInputs(in))
      return op->emitOpError() << *error;

    IOCostEstimate est = estimateScheduleIO(in, policy);
    bool twoStage = est.twoStage;
    std::string reason = est.reason;
    if (force != ScheduleForce::Auto) {
      twoStage = force == ScheduleForce::TwoStage;
      reason = std::string("forced by force=") +
               (twoStage ? "two-stage" : "single-stage") + " (rule: " + reason +
               ")";
    }
    (twoStage ? numTwoStage : numSingleStage)++;

    auto kind = twoStage ? ScheduleKind::TwoStage : ScheduleKind::SingleStage;
    auto attr = ScheduleAttr::get(
        op->getContext(), kind, qTile,
        static_cast<int64_t>(std::ceil(est.twoStageElems)),
        static_cast<int64_t>(std::ceil(est.singleStageElems)));
    set(attr);
    if (emitRemarks)
      op->emitRemark() << stringifyScheduleKind(kind)
                       << ": io_two_stage = " << plain(est.twoStageElems)
                       << " elements (" << plain(est.twoStageBytes)
                       << " B), io_single_stage = "
                       << plain(est.singleStageElems) << " elements ("
                       << plain(est.singleStageBytes)
                       << " B) per query-candidate pair; " << reason;
    // Short sequences: say when flat block selection would do less work.
    if (emitRemarks && !ShapedType::isDynamic(numKeys)) {
      SelectionWork work =
          estimateSelectionWork(numKeys, blockSize, branching, topk);
      if (work.flatCheaper)
        op->emitRemark() << "flat block selection would be cheaper: "
                         << work.reason;
    }
    return success();
  }

  /// 4096 rather than 4.096000e+03.
  static std::string plain(double value) {
    std::ostringstream os;
    os << value;
    return os.str();
  }

  static int64_t ceilBytes(Type type) {
    return (type.getIntOrFloatBitWidth() + 7) / 8;
  }
};
} // namespace
