//===- BufferizableOpInterfaceImpl.cpp - Bufferizing kernel ops -----------===//
//
// The kernel-level ops read their inputs and only write their destinations
// (a kernel never reads what its destination held, but for the cache that
// pisa.kernel.pyramid_append updates), so a destination of tensor.empty
// needs no copy and every destination bufferizes in place.
//
//===----------------------------------------------------------------------===//

#include "pisa/Transforms/BufferizableOpInterfaceImpl.h"
#include "pisa/IR/PisaDialect.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::bufferization;

namespace {
template <typename OpTy>
struct KernelOpInterface
    : public DstBufferizableOpInterfaceExternalModel<KernelOpInterface<OpTy>,
                                                     OpTy> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &) const {
    // pyramid_append updates the cache it is given.
    return !cast<DestinationStyleOpInterface>(op).isDpsInit(&operand) ||
           isa<pisa::PyramidAppendKernelOp>(op);
  }

  /// The same op on the operands' buffers, without results; its
  /// destinations' buffers replace the results.
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto dps = cast<DestinationStyleOpInterface>(op);
    SmallVector<Value> operands, results;
    for (OpOperand &operand : op->getOpOperands()) {
      if (!isa<TensorType>(operand.get().getType())) {
        operands.push_back(operand.get());
        continue;
      }
      FailureOr<Value> buffer =
          getBuffer(rewriter, operand.get(), options, state);
      if (failed(buffer))
        return failure();
      operands.push_back(*buffer);
      if (dps.isDpsInit(&operand))
        results.push_back(*buffer);
    }
    rewriter.setInsertionPoint(op);
    OperationState bufferized(op->getLoc(), op->getName(), operands,
                              /*types=*/TypeRange{}, op->getAttrs());
    rewriter.create(bufferized);
    replaceOpWithBufferizedValues(rewriter, op, results);
    return success();
  }
};

template <typename... Ops> void attachAll(MLIRContext *ctx) {
  (Ops::template attachInterface<KernelOpInterface<Ops>>(*ctx), ...);
}
} // namespace

void mlir::pisa::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, PisaDialect *) {
    attachAll<PyramidKernelOp, FragmentPlanesKernelOp, WalkKernelOp,
              BucketKernelOp, ScoreTilesKernelOp, SelectFinalKernelOp,
              SelectSingleStageKernelOp, PyramidVarlenKernelOp,
              SelectSingleStageVarlenKernelOp, PyramidAppendKernelOp,
              SelectDecodeKernelOp, SparseAttentionKernelOp, LseScoreKernelOp,
              SparseAttentionGradQueriesKernelOp,
              SparseAttentionGradKeysKernelOp, SparseAttentionGradDeltaKernelOp,
              SparseAttentionGradQueriesFromScoresKernelOp>(ctx);
  });
}
