//===- SelectSchedule.cpp - Annotate hier_topk with its schedule ----------===//
//
// A decision pass: it reads shapes and attributes, applies the IO-cost model
// and attaches #pisa.schedule. It never rewrites the op otherwise.
//
//===----------------------------------------------------------------------===//

#include "pisa/Analysis/IOCostModel.h"
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
    if (qTile < 1) {
      getOperation()->emitError()
          << "expected q-tile >= 1 but got " << int64_t(qTile);
      return signalPassFailure();
    }
    WalkResult result = getOperation()->walk([&](HierTopKOp op) {
      return failed(annotate(op)) ? WalkResult::interrupt()
                                  : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  LogicalResult annotate(HierTopKOp op) {
    if (keepExisting && op.getScheduleAttr())
      return success();
    RankedTensorType qType = op.getQueries().getType();
    RankedTensorType kType = op.getKeys().getType();
    const unsigned heads = headDimIndex(op.getTokenMajor());
    int64_t hq = qType.getDimSize(heads), hkv = kType.getDimSize(heads);
    int64_t d = qType.getDimSize(3);
    if (ShapedType::isDynamic(hq) || ShapedType::isDynamic(hkv) ||
        ShapedType::isDynamic(d))
      return op.emitOpError()
             << "needs static Hq, Hkv and d to choose a schedule";

    IOCostInputs in;
    in.groupSize = hq / hkv;
    in.blockSize = op.getBlockSize();
    in.qTile = qTile;
    in.headDim = d;
    in.queryBytes = ceilBytes(qType.getElementType());
    in.keyBytes = ceilBytes(kType.getElementType());
    int64_t nq = qType.getDimSize(tokenDimIndex(op.getTokenMajor()));
    if (!ShapedType::isDynamic(nq))
      in.numQueries = nq;
    if (std::optional<std::string> error = validateIOCostInputs(in))
      return op.emitOpError() << *error;

    IOCostEstimate est = estimateScheduleIO(in, policy);
    bool twoStage = est.twoStage;
    std::string reason = est.reason;
    if (force != ScheduleForce::Auto) {
      twoStage = force == ScheduleForce::TwoStage;
      reason = std::string("forced by force=") +
               (twoStage ? "two-stage" : "single-stage") + " (rule: " +
               reason + ")";
    }
    (twoStage ? numTwoStage : numSingleStage)++;

    auto kind = twoStage ? ScheduleKind::TwoStage : ScheduleKind::SingleStage;
    auto attr = ScheduleAttr::get(
        op.getContext(), kind, qTile,
        static_cast<int64_t>(std::ceil(est.twoStageElems)),
        static_cast<int64_t>(std::ceil(est.singleStageElems)));
    op.setScheduleAttr(attr);
    if (emitRemarks)
      op.emitRemark() << stringifyScheduleKind(kind)
                      << ": io_two_stage = " << plain(est.twoStageElems)
                      << " elements (" << plain(est.twoStageBytes)
                      << " B), io_single_stage = "
                      << plain(est.singleStageElems) << " elements ("
                      << plain(est.singleStageBytes)
                      << " B) per query-candidate pair; " << reason;
    // Short sequences: say when flat block selection would do less work.
    int64_t numKeys = kType.getDimSize(2);
    if (emitRemarks && !ShapedType::isDynamic(numKeys)) {
      SelectionWork work = estimateSelectionWork(
          numKeys, op.getBlockSize(), op.getBranching(), op.getTopk());
      if (work.flatCheaper)
        op.emitRemark() << "flat block selection would be cheaper: "
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
