//===- KernelBuilder.cpp - gpu.func kernels and their launches ------------===//

#include "Kernels/KernelBuilder.h"

#include "../Common/LoopBuilders.h"

#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::pisa::detail;

static constexpr llvm::StringLiteral kKernelModuleName = "pisa_kernels";

Kernel::Kernel(gpu::GPUFuncOp func, ArrayRef<KernelParam> params) : fn(func) {
  for (const KernelParam &p : params)
    names.push_back(p.name.str());
}

unsigned Kernel::indexOf(StringRef name) const {
  for (auto [i, n] : llvm::enumerate(names))
    if (n == name)
      return i;
  gpu::GPUFuncOp func = fn;
  llvm::report_fatal_error("kernel @" + func.getName() + " has no parameter '" +
                           name + "'");
}

Value Kernel::arg(StringRef name) const {
  gpu::GPUFuncOp func = fn;
  return func.getBody().front().getArgument(indexOf(name));
}

SmallVector<Value> Kernel::operands(ArrayRef<KernelOperand> values) const {
  // Checked in release builds too: a missing operand would be a null Value.
  SmallVector<Value> ordered(names.size());
  for (const KernelOperand &v : values) {
    unsigned i = indexOf(v.first);
    if (ordered[i])
      llvm::report_fatal_error("kernel parameter '" + v.first +
                               "' passed twice");
    ordered[i] = v.second;
  }
  for (auto [i, v] : llvm::enumerate(ordered))
    if (!v)
      llvm::report_fatal_error(llvm::Twine("kernel parameter '") + names[i] +
                               "' not passed");
  return ordered;
}

Kernel mlir::pisa::detail::createKernel(PatternRewriter &rewriter,
                                        Operation *anchor, StringRef name,
                                        ArrayRef<KernelParam> params,
                                        TypeRange workgroup,
                                        TypeRange privates) {
  auto module = anchor->getParentOfType<ModuleOp>();
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  rewriter.getUnitAttr());
  auto kernels = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName);
  Location loc = anchor->getLoc();
  if (!kernels) {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToEnd(module.getBody());
    kernels = gpu::GPUModuleOp::create(rewriter, loc, kKernelModuleName);
  }
  rewriter.setInsertionPointToEnd(&kernels.getBodyRegion().front());
  SmallVector<Type> types;
  for (const KernelParam &p : params)
    types.push_back(p.type);
  auto func = gpu::GPUFuncOp::create(rewriter, loc, name,
                                     rewriter.getFunctionType(types, {}),
                                     workgroup, privates);
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                rewriter.getUnitAttr());
  SymbolTable(kernels).insert(func); // uniques the name
  rewriter.setInsertionPointToStart(&func.getBody().front());
  return Kernel(func, params);
}

Kernel mlir::pisa::detail::createKernelFor(PatternRewriter &rewriter,
                                           Operation *anchor, StringRef name,
                                           ArrayRef<KernelOperand> operands,
                                           TypeRange workgroup,
                                           TypeRange privates) {
  SmallVector<KernelParam> params;
  for (const KernelOperand &operand : operands)
    params.push_back({operand.first, operand.second.getType()});
  return createKernel(rewriter, anchor, name, params, workgroup, privates);
}

void mlir::pisa::detail::viewTokenMajorOperands(RewriterBase &rewriter,
                                                Operation *op) {
  if (!op->hasAttr("token_major"))
    return;
  using Operands = SmallVector<OpOperand *>;
  Operands tokenIndexed =
      llvm::TypeSwitch<Operation *, Operands>(op)
          .Case([](PyramidKernelOp o) { return Operands{&o.getKeysMutable()}; })
          .Case([](FragmentPlanesKernelOp o) {
            return Operands{&o.getPyramidMutable()};
          })
          .Case([](WalkKernelOp o) {
            // A packed batch's f32 pyramid is [1, R, Hkv, d] too.
            if (o.getCuSeqlensQ() && !o.getTensorCores())
              return Operands{&o.getQueriesMutable(), &o.getPyramidMutable()};
            return Operands{&o.getQueriesMutable()};
          })
          .Case([](ScoreTilesKernelOp o) {
            return Operands{&o.getQueriesMutable(), &o.getKeysMutable()};
          })
          .Case([](SelectFinalKernelOp o) {
            return Operands{&o.getSelectionMutable()};
          })
          .Case([](SelectSingleStageKernelOp o) {
            return Operands{&o.getQueriesMutable(), &o.getKeysMutable(),
                            &o.getSelectionMutable()};
          })
          .Case([](SparseAttentionKernelOp o) {
            return Operands{&o.getQueriesMutable(), &o.getKeysMutable(),
                            &o.getValuesMutable(),  &o.getSelectionMutable(),
                            &o.getOutputMutable(),  &o.getLseMutable()};
          })
          .Case([](SparseAttentionGradQueriesKernelOp o) {
            return Operands{
                &o.getQueriesMutable(),    &o.getKeysMutable(),
                &o.getValuesMutable(),     &o.getSelectionMutable(),
                &o.getOutputMutable(),     &o.getLseMutable(),
                &o.getGradOutputMutable(), &o.getGradQueriesMutable()};
          })
          .Case([](SparseAttentionGradDeltaKernelOp o) {
            return Operands{&o.getOutputMutable(), &o.getGradOutputMutable()};
          })
          .Case([](SparseAttentionGradQueriesFromScoresKernelOp o) {
            return Operands{&o.getQueriesMutable(), &o.getKeysMutable(),
                            &o.getSelectionMutable(),
                            &o.getGradQueriesMutable()};
          })
          .Case([](SparseAttentionGradKeysKernelOp o) {
            return Operands{&o.getQueriesMutable(),  &o.getKeysMutable(),
                            &o.getValuesMutable(),   &o.getSelectionMutable(),
                            &o.getLseMutable(),      &o.getGradOutputMutable(),
                            &o.getGradKeysMutable(), &o.getGradValuesMutable()};
          })
          .Default([](Operation *) { return Operands{}; });
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  // [B, T, H, X] -> [B, H, T, X]; a 3-D [B, T, H] (attention's lse) ->
  // [B, H, T].
  static constexpr unsigned kSwap[] = {0, 2, 1, 3};
  auto swap = [&](Value v) {
    int64_t rank = cast<MemRefType>(v.getType()).getRank();
    return AffineMapAttr::get(AffineMap::getPermutationMap(
        ArrayRef<unsigned>(kSwap).take_front(rank), op->getContext()));
  };
  rewriter.modifyOpInPlace(op, [&] {
    for (OpOperand *operand : tokenIndexed)
      operand->set(memref::TransposeOp::create(
          rewriter, op->getLoc(), operand->get(), swap(operand->get())));
    op->removeAttr("token_major");
  });
}

void mlir::pisa::detail::launch(ImplicitLocOpBuilder &b, const Kernel &kernel,
                                Value gx, Value gy, int64_t bx,
                                ArrayRef<KernelOperand> operands,
                                int64_t dynamicSharedBytes) {
  Value one = arith::ConstantIndexOp::create(b, 1);
  Value threads = arith::ConstantIndexOp::create(b, bx);
  auto create = [&](ImplicitLocOpBuilder &lb) {
    gpu::LaunchFuncOp::create(
        lb, kernel.func(), gpu::KernelDim3{gx, gy, one},
        gpu::KernelDim3{threads, one, one},
        dynamicSharedBytes > 0
            ? arith::ConstantIntOp::create(lb, dynamicSharedBytes, 32)
                  .getResult()
            : Value(),
        kernel.operands(operands));
  };
  if (getConstantIntValue(gx) && getConstantIntValue(gy)) {
    create(b);
    return;
  }
  // A grid sized at run time may be empty (N = 0, Nq = 0, B = 0), which
  // CUDA refuses to launch: skip the launch instead.
  Value zero = arith::ConstantIndexOp::create(b, 0);
  Value nonEmpty = arith::AndIOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, gx, zero),
      arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, gy, zero));
  auto ifOp = scf::IfOp::create(b, nonEmpty, /*withElseRegion=*/false);
  ImplicitLocOpBuilder tb =
      ImplicitLocOpBuilder::atBlockBegin(b.getLoc(), ifOp.thenBlock());
  tb.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  create(tb);
}

void mlir::pisa::detail::requireAtRuntime(ImplicitLocOpBuilder &b, Value cond,
                                          const Twine &message) {
  cf::AssertOp::create(b, cond, message.str());
}

Value mlir::pisa::detail::blockIdX(ImplicitLocOpBuilder &b) {
  return gpu::BlockIdOp::create(b, gpu::Dimension::x);
}
Value mlir::pisa::detail::blockIdY(ImplicitLocOpBuilder &b) {
  return gpu::BlockIdOp::create(b, gpu::Dimension::y);
}
Value mlir::pisa::detail::threadIdX(ImplicitLocOpBuilder &b) {
  return gpu::ThreadIdOp::create(b, gpu::Dimension::x);
}

ThreadPlace::ThreadPlace(ImplicitLocOpBuilder &b, int64_t kvHeads) {
  batch = arith::DivUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
  kv = arith::RemUIOp::create(b, blockIdY(b), indexConst(b, kvHeads));
  tid = threadIdX(b);
  warp = arith::DivUIOp::create(b, tid, indexConst(b, 32));
  lane = arith::RemUIOp::create(b, tid, indexConst(b, 32));
  gid = arith::DivUIOp::create(b, lane, indexConst(b, 4));
  tig = arith::RemUIOp::create(b, lane, indexConst(b, 4));
}

Value mlir::pisa::detail::loadRow(ImplicitLocOpBuilder &b, Value tile,
                                  ValueRange at, int64_t n, Type type) {
  const int64_t bytes = n * type.getIntOrFloatBitWidth() / 8;
  return vector::LoadOp::create(b, VectorType::get({n}, type), tile, at, false,
                                llvm::MaybeAlign(std::min<int64_t>(16, bytes)));
}

void mlir::pisa::detail::storeRow(ImplicitLocOpBuilder &b, Value v, Value tile,
                                  ValueRange at) {
  auto type = cast<VectorType>(v.getType());
  const int64_t bytes =
      type.getNumElements() * type.getElementTypeBitWidth() / 8;
  vector::StoreOp::create(b, v, tile, at, false,
                          llvm::MaybeAlign(std::min<int64_t>(16, bytes)));
}

Value mlir::pisa::detail::toElementsOf(ImplicitLocOpBuilder &b, Value v,
                                       Value memref) {
  Type elem = cast<MemRefType>(memref.getType()).getElementType();
  auto type = cast<VectorType>(v.getType());
  if (elem == type.getElementType())
    return v;
  return arith::TruncFOp::create(b, VectorType::get(type.getShape(), elem), v);
}

MemRefType mlir::pisa::detail::globalType(ArrayRef<int64_t> shape, Type elem) {
  return MemRefType::get(shape, elem);
}

MemRefType mlir::pisa::detail::privateType(MLIRContext *ctx,
                                           ArrayRef<int64_t> shape, Type elem) {
  return MemRefType::get(shape, elem, MemRefLayoutAttrInterface(),
                         gpu::AddressSpaceAttr::get(
                             ctx, gpu::GPUDialect::getPrivateAddressSpace()));
}

MemRefType mlir::pisa::detail::workgroupType(MLIRContext *ctx,
                                             ArrayRef<int64_t> shape,
                                             Type elem) {
  return MemRefType::get(shape, elem, MemRefLayoutAttrInterface(),
                         gpu::AddressSpaceAttr::get(
                             ctx, gpu::GPUDialect::getWorkgroupAddressSpace()));
}

void mlir::pisa::detail::setOccupancyHint(gpu::GPUFuncOp kernel,
                                          int64_t threads,
                                          int64_t blocksPerSM) {
  Builder b(kernel.getContext());
  kernel.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({static_cast<int32_t>(threads), 1, 1}));
  kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                  b.getI32IntegerAttr(blocksPerSM));
}

void mlir::pisa::detail::applyOccupancyHint(gpu::GPUFuncOp kernel,
                                            KernelConfigAttr config) {
  if (std::optional<int64_t> blocks = config.getMinBlocksPerSM())
    setOccupancyHint(kernel, config.getThreads(), *blocks);
}

Value mlir::pisa::detail::mmaFragment(ImplicitLocOpBuilder &b,
                                      ArrayRef<Value> pairs) {
  auto pairType = cast<VectorType>(pairs[0].getType());
  auto type =
      VectorType::get({int64_t(pairs.size()), 2}, pairType.getElementType());
  Value v = arith::ConstantOp::create(b, type, b.getZeroAttr(type));
  for (auto [i, pair] : llvm::enumerate(pairs))
    v = vector::InsertOp::create(b, pair, v, ArrayRef<int64_t>{int64_t(i)});
  return v;
}

Value mlir::pisa::detail::fastLog2(ImplicitLocOpBuilder &b, Value x) {
  return math::Log2Op::create(
      b, x,
      arith::FastMathFlagsAttr::get(b.getContext(), arith::FastMathFlags::afn));
}

Value mlir::pisa::detail::fastExp2(ImplicitLocOpBuilder &b, Value x) {
  return math::Exp2Op::create(
      b, x,
      arith::FastMathFlagsAttr::get(b.getContext(), arith::FastMathFlags::afn));
}

Value mlir::pisa::detail::concatVectors(ImplicitLocOpBuilder &b, Value x,
                                        Value y) {
  int64_t n = cast<VectorType>(x.getType()).getNumElements() +
              cast<VectorType>(y.getType()).getNumElements();
  SmallVector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i)
    order[i] = i;
  return vector::ShuffleOp::create(b, x, y, order);
}

SmallVector<Value> PagedKeys::at(ImplicitLocOpBuilder &b, Value batch, Value j,
                                 Value head, Value feature) const {
  Value s = indexConst(b, pageSize);
  Value page = toIndex(
      b, memref::LoadOp::create(
             b, table, ValueRange{batch, arith::DivUIOp::create(b, j, s)}));
  return {page, arith::RemUIOp::create(b, j, s), head, feature};
}

Value PagedKeys::pagesBelow(ImplicitLocOpBuilder &b, Value n,
                            Value capacity) const {
  Value keys = arith::MinSIOp::create(
      b, arith::MaxSIOp::create(b, n, indexConst(b, 0)), capacity);
  return arith::CeilDivUIOp::create(b, keys, indexConst(b, pageSize));
}

Value PagedKeys::outside(ImplicitLocOpBuilder &b, Value batch, Value i,
                         Value numPages) const {
  Value page =
      toIndex(b, memref::LoadOp::create(b, table, ValueRange{batch, i}));
  return arith::OrIOp::create(
      b, cmp(b, arith::CmpIPredicate::slt, page, indexConst(b, 0)),
      cmp(b, arith::CmpIPredicate::sge, page, numPages));
}

Value mlir::pisa::detail::f32Splat(ImplicitLocOpBuilder &b, VectorType type,
                                   float v) {
  return arith::ConstantOp::create(
      b, type, DenseElementsAttr::get(type, b.getF32FloatAttr(v)));
}

Value mlir::pisa::detail::tileProduct(ImplicitLocOpBuilder &b, Value lhs,
                                      Value rhs, Value acc, bool rhsIsKN) {
  AffineExpr m, n, k;
  bindDims(b.getContext(), m, n, k);
  return vector::ContractionOp::create(
      b, lhs, rhs, acc,
      ArrayRef<ArrayRef<AffineExpr>>{{m, k},
                                     rhsIsKN ? ArrayRef<AffineExpr>{k, n}
                                             : ArrayRef<AffineExpr>{n, k},
                                     {m, n}},
      ArrayRef<vector::IteratorType>{vector::IteratorType::parallel,
                                     vector::IteratorType::parallel,
                                     vector::IteratorType::reduction});
}

Value mlir::pisa::detail::iotaI32(ImplicitLocOpBuilder &b, int64_t n) {
  auto type = VectorType::get({n}, b.getI32Type());
  SmallVector<int32_t> values(n);
  for (int64_t i = 0; i < n; ++i)
    values[i] = i;
  return arith::ConstantOp::create(
      b, type, DenseElementsAttr::get(type, ArrayRef<int32_t>(values)));
}

Value mlir::pisa::detail::shuffleXor(ImplicitLocOpBuilder &b, Value v,
                                     int64_t mask) {
  return gpu::ShuffleOp::create(b, v, arith::ConstantIntOp::create(b, mask, 32),
                                arith::ConstantIntOp::create(b, 32, 32),
                                gpu::ShuffleMode::XOR)
      .getShuffleResult();
}

Value mlir::pisa::detail::shuffleFrom(ImplicitLocOpBuilder &b, Value v,
                                      Value source) {
  return gpu::ShuffleOp::create(
             b, v, arith::IndexCastOp::create(b, b.getI32Type(), source),
             arith::ConstantIntOp::create(b, 32, 32), gpu::ShuffleMode::IDX)
      .getShuffleResult();
}
