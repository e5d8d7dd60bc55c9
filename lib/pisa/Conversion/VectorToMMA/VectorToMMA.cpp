//===- VectorToMMA.cpp - Warp tile contractions to mma.sync ---------------===//
//
// A warp tile product is `vector.contract` (m, k) x (n, k) -> (m, n) (or
// (m, k) x (k, n), a value tile) with 16-bit float operands and an f32
// accumulator (zero, or a tile read from shared memory), its operands read
// from shared memory with `vector.transfer_read` and its result written
// with `vector.transfer_write` or consumed in registers by a row epilogue
// (AccumulatorEpilogue.cpp). The pass unrolls such slices to m16n8k16,
// converts them to nvgpu.ldmatrix + nvgpu.mma.sync and distributes the
// epilogue over the accumulators; f16 then lowers through upstream's
// convert-nvgpu-to-nvvm, bf16 (which it rejects) here.
//
// Why not upstream's vector-to-gpu (nvgpu mode)? In MLIR 22 it has no bf16
// register layout, and on the pisa kernels it takes unrelated scalar index
// arithmetic for part of an mma slice and fails; the conversion below
// handles exactly the slice shape the kernels emit.
//
// Fragment layouts (PTX ISA, mma.m16n8k16, 16-bit operands), with
// g = lane / 4 and i = lane % 4: A holds (row g | g+8, cols 2i, 2i+1 | +8),
// B holds (k = 2i, 2i+1 | +8, col g), C holds (row g | g+8, cols 2i, 2i+1).
// ldmatrix.x4 on a row-major 16x16 A tile gives exactly A's four registers
// when lane l points at row l % 16, column 8 * (l / 16); ldmatrix.x2 on the
// n-major 8x16 B tile gives B's two when lane l points at row l % 8,
// column 8 * ((l / 8) % 2); ldmatrix.x2.trans on a k-major 16x8 B tile
// gives them when lane l points at row l % 16.
//
//===----------------------------------------------------------------------===//

#include "pisa/Conversion/VectorToMMA/VectorToMMA.h"
#include "pisa/Conversion/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <array>

namespace mlir::pisa {
#define GEN_PASS_DEF_CONVERTVECTORTOMMASYNC
#include "pisa/Conversion/Passes.h.inc"
} // namespace mlir::pisa

using namespace mlir;

namespace {

constexpr int64_t kM = 16, kN = 8, kK = 16;

/// Marks the ops of a slice with the shape they unroll to.
constexpr llvm::StringLiteral kNativeShapeAttr = "pisa.mma_native_shape";

/// The B operand's layout in a warp tile product: (n, k), the transposed
/// key tile of a score product, or (k, n), the value tile of P x V.
enum class BLayout { NK, KN };

std::optional<BLayout> warpMatmulLayout(vector::ContractionOp op) {
  MLIRContext *ctx = op.getContext();
  AffineExpr m, n, k;
  bindDims(ctx, m, n, k);
  auto lhs = op.getLhsType(), rhs = op.getRhsType();
  auto acc = dyn_cast<VectorType>(op.getAccType());
  if (op.getKind() != vector::CombiningKind::ADD || !acc ||
      !acc.getElementType().isF32() ||
      !(lhs.getElementType().isF16() || lhs.getElementType().isBF16()) ||
      lhs.getElementType() != rhs.getElementType() ||
      lhs.getDimSize(0) % kM != 0 || lhs.getDimSize(1) % kK != 0)
    return std::nullopt;
  for (BLayout layout : {BLayout::NK, BLayout::KN}) {
    bool nk = layout == BLayout::NK;
    SmallVector<AffineMap> maps = AffineMap::inferFromExprList(
        ArrayRef<ArrayRef<AffineExpr>>{{m, k},
                                       nk ? ArrayRef<AffineExpr>{n, k}
                                          : ArrayRef<AffineExpr>{k, n},
                                       {m, n}},
        ctx);
    if (op.getIndexingMapsArray() == maps &&
        rhs.getDimSize(nk ? 0 : 1) % kN == 0)
      return layout;
  }
  return std::nullopt;
}

bool isWarpMatmul(vector::ContractionOp op) {
  return warpMatmulLayout(op).has_value();
}

void markNativeShape(Operation *op, ArrayRef<int64_t> shape) {
  op->setAttr(kNativeShapeAttr,
              DenseI64ArrayAttr::get(op->getContext(), shape));
}

/// Canonicalization patterns of every loaded op, as the canonicalizer uses:
/// they fold the extract/insert_strided_slice chains unrolling leaves.
void addCanonicalizations(RewritePatternSet &patterns, MLIRContext *ctx) {
  for (Dialect *dialect : ctx->getLoadedDialects())
    dialect->getCanonicalizationPatterns(patterns);
  for (RegisteredOperationName op : ctx->getRegisteredOperations())
    op.getCanonicalizationPatterns(patterns, ctx);
}

bool isSharedMemory(Value memref) {
  auto type = dyn_cast<MemRefType>(memref.getType());
  auto space =
      type ? dyn_cast_or_null<gpu::AddressSpaceAttr>(type.getMemorySpace())
           : nullptr;
  return space &&
         space.getValue() == gpu::GPUDialect::getWorkgroupAddressSpace();
}

/// Whether every dimension of a transfer is in bounds.
bool allInBounds(VectorTransferOpInterface op) {
  return llvm::all_of(op.getInBoundsValues(), [](bool b) { return b; });
}

/// Whether `read` may move down to `user`: same block, and nothing in between
/// writes memory or synchronises. Loading a fragment at its first use keeps
/// the unrolled operands from all being live at once.
bool canSinkRead(vector::TransferReadOp read, Operation *user) {
  if (read->getBlock() != user->getBlock() || user->isBeforeInBlock(read))
    return false;
  for (Operation *op = read->getNextNode(); op != user; op = op->getNextNode())
    if (!isMemoryEffectFree(op) && !hasSingleEffect<MemoryEffects::Read>(op))
      return false;
  return true;
}

/// Which operand of mma.sync a shared-memory tile feeds.
enum class Operand { A, B, BTransposed };

/// An ldmatrix for a native 16-bit operand tile read by `read`, placed at
/// its first use where possible: x4 for the 16x16 A tile, x2 for the 8x16
/// (n, k) B tile, and x2.trans for the 16x8 (k, n) B tile (lane l points
/// at its row k = l % 16; the transposed 8x8 matrices are B's registers).
FailureOr<Value> loadFragment(RewriterBase &rewriter,
                              vector::TransferReadOp read, Operand operand,
                              Operation *firstUse) {
  VectorType type = read.getVectorType();
  const bool isA = operand == Operand::A;
  const bool trans = operand == Operand::BTransposed;
  SmallVector<int64_t, 2> shape =
      isA ? SmallVector<int64_t, 2>{kM, kK}
          : (trans ? SmallVector<int64_t, 2>{kK, kN}
                   : SmallVector<int64_t, 2>{kN, kK});
  if (!read.getPermutationMap().isMinorIdentity() || !allInBounds(read) ||
      read.getMask() || !isSharedMemory(read.getBase()) ||
      type.getShape() != ArrayRef<int64_t>(shape))
    return rewriter.notifyMatchFailure(
        read, "mma operands must be in-bounds row-major reads of shared "
              "memory");
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(canSinkRead(read, firstUse) ? firstUse
                                                         : read.getOperation());
  ImplicitLocOpBuilder b(read.getLoc(), rewriter);
  auto cst = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, v);
  };
  Value lane = gpu::LaneIdOp::create(b, /*upper_bound=*/nullptr);
  SmallVector<Value> indices(read.getIndices());
  size_t rank = indices.size();
  if (trans) {
    indices[rank - 2] = arith::AddIOp::create(
        b, indices[rank - 2], arith::RemUIOp::create(b, lane, cst(16)));
  } else {
    Value rowInTile = arith::RemUIOp::create(b, lane, cst(isA ? 16 : 8));
    Value colTile = arith::DivUIOp::create(b, lane, cst(isA ? 16 : 8));
    if (!isA)
      colTile = arith::RemUIOp::create(b, colTile, cst(2));
    indices[rank - 2] = arith::AddIOp::create(b, indices[rank - 2], rowInTile);
    indices[rank - 1] = arith::AddIOp::create(
        b, indices[rank - 1], arith::MulIOp::create(b, colTile, cst(8)));
  }
  int64_t tiles = isA ? 4 : 2;
  auto fragment = VectorType::get({tiles, 2}, type.getElementType());
  return nvgpu::LdMatrixOp::create(b, fragment, read.getBase(), indices,
                                   /*transpose=*/trans, tiles)
      .getResult();
}

/// Where the lane's two accumulator pairs of an m16n8 tile at `tile` (the
/// tile's first row and column in the last two indices) sit: rows l / 4 and
/// l / 4 + 8, columns 2 (l % 4) + {0, 1}.
std::array<SmallVector<Value>, 2> accumulatorPairs(ImplicitLocOpBuilder &b,
                                                   ValueRange tile) {
  auto cst = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, v);
  };
  Value lane = gpu::LaneIdOp::create(b, /*upper_bound=*/nullptr);
  Value row = arith::DivUIOp::create(b, lane, cst(4));
  Value col =
      arith::MulIOp::create(b, arith::RemUIOp::create(b, lane, cst(4)), cst(2));
  size_t rank = tile.size();
  Value col0 = arith::AddIOp::create(b, tile[rank - 1], col);
  std::array<SmallVector<Value>, 2> pairs;
  for (int64_t half = 0; half < 2; ++half) {
    pairs[half].assign(tile.begin(), tile.end());
    pairs[half][rank - 2] = arith::AddIOp::create(
        b, tile[rank - 2], arith::AddIOp::create(b, row, cst(8 * half)));
    pairs[half][rank - 1] = col0;
  }
  return pairs;
}

/// The lane's accumulator pairs of the m16n8 f32 tile `read` reads from
/// shared memory: the inverse of storeFragment, for a product accumulated
/// onto a tile.
FailureOr<Value> loadAccumulator(RewriterBase &rewriter,
                                 vector::TransferReadOp read) {
  if (!read.getPermutationMap().isMinorIdentity() || !allInBounds(read) ||
      read.getMask() || !isSharedMemory(read.getBase()) ||
      !read.getVectorType().getElementType().isF32() ||
      read.getVectorType().getShape() != ArrayRef<int64_t>{kM, kN})
    return failure();
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(read);
  ImplicitLocOpBuilder b(read.getLoc(), rewriter);
  auto accType = VectorType::get({2, 2}, b.getF32Type());
  Value acc = arith::ConstantOp::create(
      b, accType, DenseElementsAttr::get(accType, b.getF32FloatAttr(0.0f)));
  for (auto [half, at] :
       llvm::enumerate(accumulatorPairs(b, read.getIndices())))
    acc = vector::InsertOp::create(
        b,
        vector::LoadOp::create(b, VectorType::get({2}, b.getF32Type()),
                               read.getBase(), at),
        acc, ArrayRef<int64_t>{int64_t(half)});
  return acc;
}

/// Stores an m16n8 accumulator fragment where `write` puts its tile.
LogicalResult storeFragment(RewriterBase &rewriter,
                            vector::TransferWriteOp write, Value fragment) {
  if (!write.getPermutationMap().isMinorIdentity() || !allInBounds(write) ||
      write.getMask() ||
      write.getVectorType().getShape() != ArrayRef<int64_t>{kM, kN})
    return rewriter.notifyMatchFailure(
        write, "mma results must be written in bounds, row-major");
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(write);
  ImplicitLocOpBuilder b(write.getLoc(), rewriter);
  for (auto [half, at] :
       llvm::enumerate(accumulatorPairs(b, write.getIndices())))
    vector::StoreOp::create(b,
                            vector::ExtractOp::create(
                                b, fragment, ArrayRef<int64_t>{int64_t(half)}),
                            write.getBase(), at);
  rewriter.eraseOp(write);
  return success();
}

/// nvgpu.mma.sync with bf16 operands as nvvm.mma.sync: operand pairs go in
/// i32 registers, as PTX wants them.
struct BF16MmaSyncToNVVM : OpRewritePattern<nvgpu::MmaSyncOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nvgpu::MmaSyncOp op,
                                PatternRewriter &rewriter) const override {
    auto aType = cast<VectorType>(op.getMatrixA().getType());
    auto cType = cast<VectorType>(op.getMatrixC().getType());
    if (!aType.getElementType().isBF16() || !cType.getElementType().isF32() ||
        ArrayRef<int64_t>(op.getMmaShapeAsArray()) !=
            ArrayRef<int64_t>{kM, kN, kK})
      return rewriter.notifyMatchFailure(op, "not a bf16 m16n8k16 mma");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Type i32 = b.getI32Type(), f32 = b.getF32Type();
    auto words = [&](Value fragment) {
      auto type = cast<VectorType>(fragment.getType());
      SmallVector<Value> regs;
      for (int64_t r = 0; r < type.getDimSize(0); ++r) {
        Value pair =
            vector::ExtractOp::create(b, fragment, ArrayRef<int64_t>{r});
        Value word =
            vector::BitCastOp::create(b, VectorType::get({1}, i32), pair);
        regs.push_back(
            vector::ExtractOp::create(b, word, ArrayRef<int64_t>{0}));
      }
      return regs;
    };
    SmallVector<Value> acc;
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t c = 0; c < 2; ++c)
        acc.push_back(vector::ExtractOp::create(b, op.getMatrixC(),
                                                ArrayRef<int64_t>{r, c}));
    Type accType =
        LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
    Value d = NVVM::MmaOp::create(
        b, accType, words(op.getMatrixA()), words(op.getMatrixB()), acc,
        {kM, kN, kK}, std::nullopt, std::nullopt,
        std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16,
                                      NVVM::MMATypes::bf16},
        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                       NVVM::MMALayout::col});
    // Rows of the 2x2 result as 1-D vectors: n-D shape casts do not lower.
    Value result = arith::ConstantOp::create(
        b, cType, DenseElementsAttr::get(cType, b.getF32FloatAttr(0.0f)));
    auto pairType = VectorType::get({2}, f32);
    for (int64_t r = 0; r < 2; ++r) {
      SmallVector<Value> pair;
      for (int64_t c = 0; c < 2; ++c)
        pair.push_back(
            LLVM::ExtractValueOp::create(b, d, ArrayRef<int64_t>{2 * r + c}));
      result = vector::InsertOp::create(
          b, vector::FromElementsOp::create(b, pairType, pair), result,
          ArrayRef<int64_t>{r});
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct ConvertVectorToMmaSyncPass
    : pisa::impl::ConvertVectorToMmaSyncBase<ConvertVectorToMmaSyncPass> {
  void runOnOperation() override {
    Operation *root = getOperation();
    MLIRContext *ctx = &getContext();
    // Kernel by kernel: the unrolling's greedy rewrite and the fragment
    // maps stay inside one function (a rewrite scoped to several kernels
    // let one kernel's values reach another's ops).
    SmallVector<Operation *> functions;
    root->walk<WalkOrder::PreOrder>([&](FunctionOpInterface function) {
      functions.push_back(function);
      return WalkResult::skip();
    });
    IRRewriter rewriter(ctx);
    for (Operation *function : functions)
      if (failed(pisa::unrollWarpMatmulsToMmaShape(function)) ||
          failed(pisa::convertWarpMatmulsToNVGPU(rewriter, function)))
        return signalPassFailure();

    RewritePatternSet lower(ctx);
    pisa::populateBF16MmaSyncToNVVMPatterns(lower);
    if (failed(applyPatternsGreedily(root, std::move(lower))))
      return signalPassFailure();
  }
};

} // namespace

LogicalResult mlir::pisa::unrollWarpMatmulsToMmaShape(Operation *root) {
  MLIRContext *ctx = root->getContext();
  // The slices' ops; rewriting is confined to them and what unrolling
  // creates, so the rest of a kernel is left exactly as it was.
  SmallVector<Operation *> slice;
  auto mark = [&](Operation *op, ArrayRef<int64_t> shape) {
    markNativeShape(op, shape);
    slice.push_back(op);
  };
  root->walk([&](vector::ContractionOp op) {
    if (!isWarpMatmul(op))
      return;
    mark(op, {kM, kN, kK});
    if (auto read = op.getLhs().getDefiningOp<vector::TransferReadOp>())
      mark(read, {kM, kK});
    if (auto read = op.getRhs().getDefiningOp<vector::TransferReadOp>()) {
      if (*warpMatmulLayout(op) == BLayout::NK)
        mark(read, {kN, kK});
      else
        mark(read, {kK, kN});
    }
    if (auto read = op.getAcc().getDefiningOp<vector::TransferReadOp>())
      mark(read, {kM, kN});
    for (Operation *user : op->getUsers())
      if (isa<vector::TransferWriteOp>(user))
        mark(user, {kM, kN});
    pisa::markAccumulatorEpilogue(op.getResult(), mark);
  });
  if (slice.empty())
    return success();

  vector::UnrollVectorOptions options;
  // k outermost: each k-step's A and B fragments are used by every (m, n)
  // tile right after they are loaded, so only the accumulators stay live.
  options.setUnrollTraversalOrderFn(
      [](Operation *op) -> std::optional<SmallVector<int64_t>> {
        if (isa<vector::ContractionOp>(op))
          return SmallVector<int64_t>{2, 0, 1};
        return std::nullopt;
      });
  options.setNativeShapeFn(
      [](Operation *op) -> std::optional<SmallVector<int64_t>> {
        auto shape = op->getAttrOfType<DenseI64ArrayAttr>(kNativeShapeAttr);
        if (!shape)
          return std::nullopt;
        return SmallVector<int64_t>(shape.asArrayRef());
      });
  RewritePatternSet patterns(ctx);
  vector::populateVectorUnrollPatterns(patterns, options);
  addCanonicalizations(patterns, ctx);
  GreedyRewriteConfig config;
  config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
  if (failed(applyOpPatternsGreedily(slice, std::move(patterns), config)))
    return root->emitError("unrolling warp tile products did not converge");
  root->walk([](Operation *op) { op->removeAttr(kNativeShapeAttr); });
  return success();
}

/// The mma accumulator of `op` (the builder at `op`): an earlier k-step's
/// result, a fragment loaded from its shared-memory read, or a splat
/// constant; fails with a diagnostic on `op` otherwise.
static FailureOr<Value> accumulatorOf(RewriterBase &rewriter,
                                      vector::ContractionOp op,
                                      const DenseMap<Value, Value> &fragments) {
  auto accType = VectorType::get({2, 2}, rewriter.getF32Type());
  Value acc = fragments.lookup(op.getAcc());
  if (auto read = op.getAcc().getDefiningOp<vector::TransferReadOp>();
      !acc && read) {
    FailureOr<Value> loaded = loadAccumulator(rewriter, read);
    if (failed(loaded))
      return op.emitOpError("an mma accumulator read must be an in-bounds "
                            "row-major f32 read of shared memory");
    acc = *loaded;
    rewriter.setInsertionPoint(op);
  }
  if (!acc) {
    SplatElementsAttr splat;
    if (!matchPattern(op.getAcc(), m_Constant(&splat)))
      return op.emitOpError("mma accumulator must be a splat constant, a "
                            "shared-memory read or an mma result");
    acc = arith::ConstantOp::create(
        rewriter, op.getLoc(), accType,
        DenseElementsAttr::get(accType, splat.getSplatValue<Attribute>()));
  }
  return acc;
}

/// Stores the products' results through their transfer_writes (anything
/// else has no layout; the epilogue is gone by now), then erases the
/// contracts and the reads only they used.
static LogicalResult
storeResultsAndErase(RewriterBase &rewriter,
                     ArrayRef<vector::ContractionOp> contracts,
                     const DenseMap<Value, Value> &fragments) {
  for (vector::ContractionOp op : contracts)
    for (Operation *user : llvm::make_early_inc_range(op->getUsers())) {
      if (auto write = dyn_cast<vector::TransferWriteOp>(user)) {
        if (failed(storeFragment(rewriter, write,
                                 fragments.lookup(op.getResult()))))
          return write.emitOpError(
              "mma results must be written in bounds, row-major");
      } else if (!isa<vector::ContractionOp>(user)) {
        return user->emitOpError(
            "uses an mma result other than by transfer_write");
      }
    }
  for (vector::ContractionOp op : llvm::reverse(contracts)) {
    Value lhs = op.getLhs(), rhs = op.getRhs(), acc = op.getAcc();
    rewriter.eraseOp(op);
    for (Value operand : {lhs, rhs})
      if (Operation *def = operand.getDefiningOp(); def && def->use_empty())
        rewriter.eraseOp(def);
    // An accumulator read (an earlier k-step's contract is erased in turn).
    if (auto read = acc.getDefiningOp<vector::TransferReadOp>();
        read && read->use_empty())
      rewriter.eraseOp(read);
  }
  return success();
}

LogicalResult mlir::pisa::convertWarpMatmulsToNVGPU(RewriterBase &rewriter,
                                                    Operation *root) {
  SmallVector<vector::ContractionOp> contracts;
  root->walk([&](vector::ContractionOp op) {
    if (isWarpMatmul(op))
      contracts.push_back(op);
  });

  // Contracts in program order: a k-step's accumulator is the previous
  // step's result, already converted.
  DenseMap<Value, Value> fragments;
  auto fragmentOf = [&](vector::TransferReadOp read, Operand operand,
                        Operation *user) -> FailureOr<Value> {
    if (Value loaded = fragments.lookup(read.getResult()))
      return loaded;
    FailureOr<Value> loaded = loadFragment(rewriter, read, operand, user);
    if (succeeded(loaded))
      fragments[read.getResult()] = *loaded;
    return loaded;
  };
  for (vector::ContractionOp op : contracts) {
    const bool kn = *warpMatmulLayout(op) == BLayout::KN;
    if (op.getLhsType().getShape() != ArrayRef<int64_t>{kM, kK} ||
        op.getRhsType().getShape() !=
            (kn ? ArrayRef<int64_t>{kK, kN} : ArrayRef<int64_t>{kN, kK}))
      return op.emitOpError("tile product was not unrolled to m16n8k16");
    auto lhsRead = op.getLhs().getDefiningOp<vector::TransferReadOp>();
    auto rhsRead = op.getRhs().getDefiningOp<vector::TransferReadOp>();
    if (!lhsRead || !rhsRead)
      return op.emitOpError("mma operands must come from transfer_read");
    FailureOr<Value> a = fragmentOf(lhsRead, Operand::A, op);
    FailureOr<Value> bFrag =
        fragmentOf(rhsRead, kn ? Operand::BTransposed : Operand::B, op);
    if (failed(a) || failed(bFrag))
      return op.emitOpError(
          "mma operands must be in-bounds row-major reads of shared memory");

    rewriter.setInsertionPoint(op);
    FailureOr<Value> acc = accumulatorOf(rewriter, op, fragments);
    if (failed(acc))
      return failure();
    fragments[op.getResult()] = nvgpu::MmaSyncOp::create(
        rewriter, op.getLoc(), *a, *bFrag, *acc, {kM, kN, kK});
  }

  // Register epilogues consume results where mma.sync left them.
  if (failed(pisa::distributeAccumulatorEpilogue(rewriter, root, fragments)))
    return failure();

  return storeResultsAndErase(rewriter, contracts, fragments);
}

void mlir::pisa::populateBF16MmaSyncToNVVMPatterns(
    RewritePatternSet &patterns) {
  patterns.add<BF16MmaSyncToNVVM>(patterns.getContext());
}
