//===- KernelLowering.cpp - Each pisa op's KernelLoweringOpInterface ------===//
//
// One model per user-level op: its GPU limits (docs/gpu.md, "Supported
// shapes"), its kernel-level ops (KernelDecompositions.cpp) and what an AOT
// entry point says of the values it reads. --pisa-decompose-to-kernels and
// pisa-compile ask these models and name no op; adding an op to the GPU
// path means adding its model here.
//
//===----------------------------------------------------------------------===//

#include "Attention/AttentionGrad.h"
#include "Attention/SparseAttention.h"
#include "Decompose.h"

#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/IR/PisaDialect.h"
#include "pisa/IR/PisaInterfaces.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/IR/Matchers.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::pisa;

/// a * b for sizes and tiles (>= 0), INT64_MAX when it overflows: the
/// limits below compare products of attributes and static sizes that the
/// verifiers leave unbounded (the fuzzer found q_tile = 2^63 - 1).
static int64_t saturatingProduct(int64_t a, int64_t b) {
  int64_t product;
  return llvm::MulOverflow(a, b, product) ? INT64_MAX : product;
}

/// [B, H, T, X] of a 4-D operand's shape, whatever its layout.
static SmallVector<int64_t, 4> headMajorShape(ArrayRef<int64_t> s,
                                              bool tokenMajor) {
  return {s[0], s[headDimIndex(tokenMajor)], s[tokenDimIndex(tokenMajor)],
          s[3]};
}

static bool known(int64_t size) { return !ShapedType::isDynamic(size); }

using Why = std::optional<std::string>;

/// The pyramid kernels: one thread per feature.
static Why headDimLimit(int64_t d) {
  if (d <= kMaxGPUHeadDim)
    return std::nullopt;
  std::string why;
  llvm::raw_string_ostream(why)
      << "has head dim d = " << d << " above the GPU limit of "
      << kMaxGPUHeadDim << " (one thread per feature)";
  return why;
}

/// The selection kernels keep g * K candidates per query in per-thread
/// lists.
static Why candidateLimit(int64_t branching, int64_t topK) {
  const int64_t candidates = branching * topK;
  if (candidates <= kMaxGPUCandidates)
    return std::nullopt;
  std::string why;
  llvm::raw_string_ostream(why)
      << "keeps g * K = " << candidates
      << " candidates per query, above the GPU limit of " << kMaxGPUCandidates
      << " (per-thread candidate lists)";
  return why;
}

/// B * Hkv blocks along grid y, when B is static.
static Why groupLimit(int64_t batch, int64_t kvHeads) {
  if (!known(batch) || saturatingProduct(batch, kvHeads) <= kMaxGPUGroups)
    return std::nullopt;
  std::string why;
  llvm::raw_string_ostream(why)
      << "has B * Hkv = " << saturatingProduct(batch, kvHeads)
      << " above the GPU limit of " << kMaxGPUGroups << " (grid y)";
  return why;
}

/// A stage-2 block of the two-stage schedule runs q_tile * G threads.
static Why stageTwoThreadLimit(ScheduleAttr schedule, int64_t groupSize) {
  if (!schedule || schedule.getKind() != ScheduleKind::TwoStage ||
      saturatingProduct(schedule.getQTile(), groupSize) <= kMaxGPUThreads)
    return std::nullopt;
  std::string why;
  llvm::raw_string_ostream(why)
      << "has q_tile * G = " << schedule.getQTile() << " * " << groupSize
      << " above the GPU limit of " << kMaxGPUThreads
      << " threads per stage-2 block";
  return why;
}

/// The first limit that holds, or nothing.
static Why firstOf(std::initializer_list<Why> limits) {
  for (const Why &why : limits)
    if (why)
      return why;
  return std::nullopt;
}

static Why hierTopKLimits(HierTopKOp topk) {
  SmallVector<int64_t, 4> q = headMajorShape(
      topk.getQueries().getType().getShape(), topk.getTokenMajor());
  SmallVector<int64_t, 4> k =
      headMajorShape(topk.getKeys().getType().getShape(), topk.getTokenMajor());
  const int64_t groupSize = q[1] / k[1],
                candidates =
                    int64_t(topk.getBranching()) * int64_t(topk.getTopk());
  ScheduleAttr schedule = topk.getScheduleAttr();
  if (Why why = firstOf({candidateLimit(topk.getBranching(), topk.getTopk()),
                         groupLimit(q[0], k[1])}))
    return why;
  std::string why;
  llvm::raw_string_ostream os(why);
  if (known(q[2]) && saturatingProduct(q[2], candidates) > kMaxGPUPairs)
    os << "has queries * g * K = " << saturatingProduct(q[2], candidates)
       << " above the GPU limit of " << kMaxGPUPairs
       << " (32-bit stage-2 pair indices)";
  else if (known(k[2]) && k[2] > kMaxGPUKeys)
    os << "has N = " << k[2] << " above the GPU limit of " << kMaxGPUKeys
       << " (32-bit leaf indices)";
  else if (topk.getCapacity() && schedule &&
           schedule.getKind() == ScheduleKind::TwoStage)
    os << "reads a pyramid cache (capacity = " << *topk.getCapacity()
       << ") with the two-stage schedule: the GPU reads caches with the "
          "single-stage kernel only, for now (give "
          "#pisa.schedule<single_stage, ...>)";
  else
    return stageTwoThreadLimit(schedule, groupSize);
  return why;
}

static Why hierTopKVarlenLimits(HierTopKVarlenOp topk) {
  const int64_t kvHeads = topk.getKeys().getType().getShape()[1];
  if (Why why = candidateLimit(topk.getBranching(), topk.getTopk()))
    return why;
  if (kvHeads > kMaxGPUGroups) {
    std::string why;
    llvm::raw_string_ostream(why)
        << "has Hkv = " << kvHeads << " above the GPU limit of "
        << kMaxGPUGroups << " (grid y)";
    return why;
  }
  return stageTwoThreadLimit(topk.getScheduleAttr(),
                             topk.getQueries().getType().getShape()[1] /
                                 kvHeads);
}

static Why decodeSelectLimits(DecodeSelectOp decode) {
  // [B, Hkv, ...] of the cache, whether the keys are paged or not.
  ArrayRef<int64_t> p = decode.getPyramid().getType().getShape();
  if (Why why =
          firstOf({candidateLimit(decode.getBranching(), decode.getTopk()),
                   groupLimit(p[0], p[1])}))
    return why;
  if (decode.getCapacity() <= kMaxGPUKeys)
    return std::nullopt;
  std::string why;
  llvm::raw_string_ostream(why)
      << "has a capacity Ncap = " << decode.getCapacity()
      << " above the GPU limit of " << kMaxGPUKeys << " (32-bit leaf indices)";
  return why;
}

/// A sparse attention op's limits: the tiles' (`tileLimit`, the forward's
/// or the backward's), then the grid's.
template <typename OpTy>
static Why attentionLimits(OpTy op,
                           Why (*tileLimit)(Type, int64_t, int64_t, int64_t,
                                            int64_t, int64_t)) {
  const bool tm = op.getTokenMajor();
  SmallVector<int64_t, 4> q =
      headMajorShape(op.getQueries().getType().getShape(), tm);
  SmallVector<int64_t, 4> k =
      headMajorShape(op.getKeys().getType().getShape(), tm);
  const int64_t dv = op.getValues().getType().getShape()[3];
  if (Why why = firstOf({tileLimit(op.getQueries().getType().getElementType(),
                                   q[1] / k[1], q[3], dv, op.getBlockSize(),
                                   op.getSelection().getType().getShape()[3]),
                         groupLimit(q[0], k[1])}))
    return why;
  if (!known(q[2]) || q[2] <= kMaxGPUKeys)
    return std::nullopt;
  std::string why;
  llvm::raw_string_ostream(why)
      << "has Nq = " << q[2] << " above the GPU limit of " << kMaxGPUKeys
      << " (grid x)";
  return why;
}

/// A warp per (query, batch x KV head): Nq / 4 blocks by B * Hkv.
static Why lseScoreLimits(LseScoreOp score) {
  ArrayRef<int64_t> q = score.getQueries().getType().getShape();
  if (Why why = groupLimit(q[0], score.getChildren().getType().getShape()[1]))
    return why;
  std::string why;
  llvm::raw_string_ostream os(why);
  APInt offset;
  if (known(q[2]) && q[2] > kMaxGPUKeys)
    os << "has Nq = " << q[2] << " above the GPU limit of " << kMaxGPUKeys
       << " (grid x)";
  else if (matchPattern(score.getQueryOffset(), m_ConstantInt(&offset)) &&
           offset.getSExtValue() > kMaxGPUKeys)
    os << "has query_offset = " << offset.getSExtValue()
       << " above the GPU limit of " << kMaxGPUKeys << " (i32 positions)";
  else
    return std::nullopt;
  return why;
}

/// 0 <= offset <= N - Nq for the values a query offset feeds, when both
/// token counts are static (docs/semantics.md, section 1).
static void addQueryOffsetRange(EntryFacts &facts, Value offset, Value queries,
                                Value keys, bool tokenMajor) {
  unsigned tokens = tokenDimIndex(tokenMajor);
  int64_t nq = cast<ShapedType>(queries.getType()).getDimSize(tokens);
  int64_t n = cast<ShapedType>(keys.getType()).getDimSize(tokens);
  if (known(nq) && known(n))
    facts.ranges.push_back({offset, 0, n - nq});
}

namespace {

/// The methods every model has: the decomposition is DecomposeToKernels'
/// for the op.
template <typename ConcreteModel, typename OpTy>
struct Model : KernelLoweringOpInterface::ExternalModel<ConcreteModel, OpTy> {
  void decomposeToKernels(Operation *op, RewriterBase &rewriter) const {
    pisa::detail::decompose(rewriter, cast<OpTy>(op));
  }
};

struct PyramidBuildModel : Model<PyramidBuildModel, PyramidBuildOp> {
  Why getGPULimitViolation(Operation *op) const {
    return headDimLimit(
        cast<PyramidBuildOp>(op).getKeys().getType().getShape()[3]);
  }
};

struct PyramidBuildVarlenModel
    : Model<PyramidBuildVarlenModel, PyramidBuildVarlenOp> {
  Why getGPULimitViolation(Operation *op) const {
    return headDimLimit(
        cast<PyramidBuildVarlenOp>(op).getKeys().getType().getShape()[2]);
  }
  void describeEntry(Operation *op, EntryFacts &facts) const {
    auto build = cast<PyramidBuildVarlenOp>(op);
    facts.roles.push_back(
        {build.getCuSeqlens(), "cu_seqlens_k", build.getKeys()});
  }
};

struct LseScoreModel : Model<LseScoreModel, LseScoreOp> {
  Why getGPULimitViolation(Operation *op) const {
    return lseScoreLimits(cast<LseScoreOp>(op));
  }
};

struct HierTopKModel : Model<HierTopKModel, HierTopKOp> {
  Why getGPULimitViolation(Operation *op) const {
    return hierTopKLimits(cast<HierTopKOp>(op));
  }
  /// The schedule first, then the limits and the kernel variants.
  LogicalResult verifyKernelDecomposition(Operation *op) const {
    return pisa::detail::verifySelectionPlan(cast<HierTopKOp>(op));
  }
  void describeEntry(Operation *op, EntryFacts &facts) const {
    auto topk = cast<HierTopKOp>(op);
    addQueryOffsetRange(facts, topk.getQueryOffset(), topk.getQueries(),
                        topk.getKeys(), topk.getTokenMajor());
    facts.layouts.push_back(
        {topk.getSelection(), topk.getTokenMajor() ? "bthk" : "bhtk"});
  }
};

struct HierTopKVarlenModel : Model<HierTopKVarlenModel, HierTopKVarlenOp> {
  Why getGPULimitViolation(Operation *op) const {
    return hierTopKVarlenLimits(cast<HierTopKVarlenOp>(op));
  }
  void describeEntry(Operation *op, EntryFacts &facts) const {
    auto topk = cast<HierTopKVarlenOp>(op);
    facts.roles.push_back(
        {topk.getCuSeqlensQ(), "cu_seqlens_q", topk.getQueries()});
    facts.roles.push_back(
        {topk.getCuSeqlensK(), "cu_seqlens_k", topk.getKeys()});
  }
};

struct PyramidAppendModel : Model<PyramidAppendModel, PyramidAppendOp> {
  Why getGPULimitViolation(Operation *op) const {
    return headDimLimit(
        cast<PyramidAppendOp>(op).getKeys().getType().getShape()[3]);
  }
  /// The cache is written in place; from and to are checked against its
  /// capacity, the block table against the page pool.
  void describeEntry(Operation *op, EntryFacts &facts) const {
    auto append = cast<PyramidAppendOp>(op);
    facts.updatedInPlace.push_back(append.getPyramid());
    const int64_t capacity = append.getCapacity();
    if (known(capacity)) {
      facts.roles.push_back({append.getFrom(), "from", Value(), capacity});
      facts.roles.push_back({append.getTo(), "to", Value(), capacity});
    }
    if (Value table = append.getBlockTable())
      facts.roles.push_back({table, "block_table", append.getKeys()});
  }
};

struct DecodeSelectModel : Model<DecodeSelectModel, DecodeSelectOp> {
  Why getGPULimitViolation(Operation *op) const {
    return decodeSelectLimits(cast<DecodeSelectOp>(op));
  }
  void describeEntry(Operation *op, EntryFacts &facts) const {
    auto decode = cast<DecodeSelectOp>(op);
    facts.roles.push_back({decode.getSeqLens(), "seq_lens", decode.getQueries(),
                           int64_t(decode.getCapacity())});
    if (Value table = decode.getBlockTable())
      facts.roles.push_back({table, "block_table", decode.getKeys()});
  }
};

struct SparseAttentionModel : Model<SparseAttentionModel, SparseAttentionOp> {
  Why getGPULimitViolation(Operation *op) const {
    return attentionLimits(cast<SparseAttentionOp>(op),
                           pisa::detail::attentionLimitViolation);
  }
  void describeEntry(Operation *op, EntryFacts &facts) const {
    auto attention = cast<SparseAttentionOp>(op);
    addQueryOffsetRange(facts, attention.getQueryOffset(),
                        attention.getQueries(), attention.getKeys(),
                        attention.getTokenMajor());
  }
};

struct SparseAttentionGradModel
    : Model<SparseAttentionGradModel, SparseAttentionGradOp> {
  Why getGPULimitViolation(Operation *op) const {
    return attentionLimits(cast<SparseAttentionGradOp>(op),
                           pisa::detail::attentionGradLimitViolation);
  }
  void describeEntry(Operation *op, EntryFacts &facts) const {
    auto grad = cast<SparseAttentionGradOp>(op);
    addQueryOffsetRange(facts, grad.getQueryOffset(), grad.getQueries(),
                        grad.getKeys(), grad.getTokenMajor());
  }
};

/// A packed attention op's limits: the batched op's (`tileLimit`, the
/// forward's or the backward's) on the packed shapes ([T, H, X]) of a
/// batch of one, then the grid's.
template <typename OpTy>
static Why packedAttentionLimits(OpTy op,
                                 Why (*tileLimit)(Type, int64_t, int64_t,
                                                  int64_t, int64_t, int64_t)) {
  ArrayRef<int64_t> q = op.getQueries().getType().getShape();
  ArrayRef<int64_t> k = op.getKeys().getType().getShape();
  if (Why why = firstOf(
          {tileLimit(op.getQueries().getType().getElementType(), q[1] / k[1],
                     q[2], op.getValues().getType().getShape()[2],
                     op.getBlockSize(),
                     op.getSelection().getType().getShape()[2]),
           groupLimit(1, k[1])}))
    return why;
  if (!known(q[0]) || q[0] <= kMaxGPUKeys)
    return std::nullopt;
  std::string why;
  llvm::raw_string_ostream(why)
      << "has Tq = " << q[0] << " above the GPU limit of " << kMaxGPUKeys
      << " (grid x)";
  return why;
}

/// The runtime checks of a packed op's cu_seqlens.
template <typename OpTy>
static void describePackedEntry(OpTy op, EntryFacts &facts) {
  facts.roles.push_back({op.getCuSeqlensQ(), "cu_seqlens_q", op.getQueries()});
  facts.roles.push_back({op.getCuSeqlensK(), "cu_seqlens_k", op.getKeys()});
}

struct SparseAttentionVarlenModel
    : Model<SparseAttentionVarlenModel, SparseAttentionVarlenOp> {
  Why getGPULimitViolation(Operation *op) const {
    return packedAttentionLimits(cast<SparseAttentionVarlenOp>(op),
                                 pisa::detail::attentionLimitViolation);
  }
  void describeEntry(Operation *op, EntryFacts &facts) const {
    describePackedEntry(cast<SparseAttentionVarlenOp>(op), facts);
  }
};

struct SparseAttentionGradVarlenModel
    : Model<SparseAttentionGradVarlenModel, SparseAttentionGradVarlenOp> {
  Why getGPULimitViolation(Operation *op) const {
    return packedAttentionLimits(cast<SparseAttentionGradVarlenOp>(op),
                                 pisa::detail::attentionGradLimitViolation);
  }
  void describeEntry(Operation *op, EntryFacts &facts) const {
    describePackedEntry(cast<SparseAttentionGradVarlenOp>(op), facts);
  }
};

} // namespace

std::optional<std::string> mlir::pisa::gpuLimitViolation(Operation *op) {
  if (auto lowering = dyn_cast<KernelLoweringOpInterface>(op))
    return lowering.getGPULimitViolation();
  if (isa_and_nonnull<PisaDialect>(op->getDialect()) && !isKernelLevelOp(op))
    return kNoGPULoweringError.str();
  return std::nullopt;
}

void mlir::pisa::registerKernelLoweringExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, PisaDialect *) {
    PyramidBuildOp::attachInterface<PyramidBuildModel>(*ctx);
    PyramidBuildVarlenOp::attachInterface<PyramidBuildVarlenModel>(*ctx);
    LseScoreOp::attachInterface<LseScoreModel>(*ctx);
    HierTopKOp::attachInterface<HierTopKModel>(*ctx);
    HierTopKVarlenOp::attachInterface<HierTopKVarlenModel>(*ctx);
    PyramidAppendOp::attachInterface<PyramidAppendModel>(*ctx);
    DecodeSelectOp::attachInterface<DecodeSelectModel>(*ctx);
    SparseAttentionOp::attachInterface<SparseAttentionModel>(*ctx);
    SparseAttentionGradOp::attachInterface<SparseAttentionGradModel>(*ctx);
    SparseAttentionVarlenOp::attachInterface<SparseAttentionVarlenModel>(*ctx);
    SparseAttentionGradVarlenOp::attachInterface<
        SparseAttentionGradVarlenModel>(*ctx);
  });
}
