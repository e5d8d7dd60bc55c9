//===- WarpgroupMma.cpp - sm_90a warpgroup products from shared tiles -----===//
//
// The descriptors and products of WarpgroupMma.h.
//
//===----------------------------------------------------------------------===//

#include "Kernels/WarpgroupMma.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

using namespace mlir;
using namespace mlir::pisa::detail;

SmallVector<Value>
mlir::pisa::detail::swizzledChunkIndices(ImplicitLocOpBuilder &b, Value row,
                                         Value chunk) {
  Value perRow = arith::ConstantIndexOp::create(b, kSwizzleRowBytes / 16);
  Value block = arith::DivUIOp::create(b, chunk, perRow);
  Value position =
      arith::XOrIOp::create(b, arith::RemUIOp::create(b, chunk, perRow),
                            arith::RemUIOp::create(b, row, perRow));
  return {block, row, position, arith::ConstantIndexOp::create(b, 0)};
}

/// The descriptor's fields: the start address, the leading and stride
/// offsets (each in 16-byte units) and the 128-byte swizzle (1 in bits
/// 62-63).
static Value descriptor(ImplicitLocOpBuilder &b, Value address,
                        int64_t leadingBytes, int64_t strideBytes) {
  auto c64 = [&](int64_t v) { return arith::ConstantIntOp::create(b, v, 64); };
  Value start = arith::ShRUIOp::create(
      b, arith::AndIOp::create(b, address, c64(0x3FFFF)), c64(4));
  return arith::OrIOp::create(b, start,
                              c64(((leadingBytes >> 4) << 16) |
                                  ((strideBytes >> 4) << 32) |
                                  (int64_t(1) << 62)));
}

Value mlir::pisa::detail::kMajorDescriptor(ImplicitLocOpBuilder &b,
                                           Value address) {
  return descriptor(b, address, 16, kSwizzleAtomBytes);
}

Value mlir::pisa::detail::mnMajorDescriptor(ImplicitLocOpBuilder &b,
                                            Value address, int64_t rows) {
  return descriptor(b, address, rows * kSwizzleRowBytes, kSwizzleAtomBytes);
}

int64_t mlir::pisa::detail::kMajorStepOffset(int64_t s, int64_t rows) {
  const int64_t stepsPerRow = kSwizzleColumns / kWgmmaK;
  return ((s / stepsPerRow) * rows * kSwizzleRowBytes +
          (s % stepsPerRow) * kWgmmaK * 2) >>
         4;
}

int64_t mlir::pisa::detail::mnMajorStepOffset(int64_t s) {
  return (s * kWgmmaK * kSwizzleRowBytes) >> 4;
}

Value mlir::pisa::detail::warpgroupProduct(ImplicitLocOpBuilder &b, Type elem,
                                           int64_t n, int64_t k,
                                           const WarpgroupOperand &a,
                                           const WarpgroupOperand &bOperand,
                                           Value acc) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  auto accType =
      LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(n / 2, f32));
  NVVM::WGMMATypes inType =
      elem.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  const bool fromZero = !acc;
  if (fromZero)
    acc = LLVM::PoisonOp::create(b, accType);
  auto stepOf = [&](const WarpgroupOperand &o, int64_t s) {
    return arith::AddIOp::create(
        b, o.descriptor,
        arith::ConstantIntOp::create(
            b, o.mnMajor ? mnMajorStepOffset(s) : kMajorStepOffset(s, o.rows),
            64));
  };
  NVVM::WgmmaFenceAlignedOp::create(b);
  for (int64_t s = 0; s < k / kWgmmaK; ++s)
    acc = NVVM::WgmmaMmaAsyncOp::create(
        b, accType, acc, stepOf(a, s), stepOf(bOperand, s),
        NVVM::MMAShapeAttr::get(ctx, kWarpgroupRows, n, kWgmmaK), inType,
        inType, NVVM::WGMMATypes::f32,
        fromZero && s == 0 ? NVVM::WGMMAScaleOut::zero
                           : NVVM::WGMMAScaleOut::one,
        NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
        a.mnMajor ? NVVM::MMALayout::col : NVVM::MMALayout::row,
        bOperand.mnMajor ? NVVM::MMALayout::row : NVVM::MMALayout::col,
        /*satfinite=*/NVVM::MMAIntOverflowAttr());
  NVVM::WgmmaGroupSyncAlignedOp::create(b);
  NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
  return acc;
}

Value mlir::pisa::detail::warpgroupProductRegisterA(
    ImplicitLocOpBuilder &b, Type elem, int64_t n, ArrayRef<Value> aFragments,
    const WarpgroupOperand &bOperand, Value acc) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  const int64_t accs = n / 2;
  auto accType =
      LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(accs, f32));
  const char *type = elem.isBF16() ? "bf16" : "f16";
  NVVM::WgmmaFenceAlignedOp::create(b);
  for (auto [s, fragment] : llvm::enumerate(aFragments)) {
    // Operands: the accumulators written ($0 ..), A's four registers, B's
    // descriptor, then the accumulators read (tied to $0 ..).
    std::string text;
    llvm::raw_string_ostream ptx(text);
    ptx << "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        << "wgmma.mma_async.sync.aligned.m64n" << n << "k16.f32." << type << "."
        << type << " {";
    for (int64_t i = 0; i < accs; ++i)
      ptx << (i ? ", " : "") << "$" << i;
    ptx << "}, {$" << accs << ", $" << accs + 1 << ", $" << accs + 2 << ", $"
        << accs + 3 << "}, $" << accs + 4 << ", p, 1, 1, "
        << (bOperand.mnMajor ? 1 : 0) << ";\n}";
    std::string constraints;
    for (int64_t i = 0; i < accs; ++i)
      constraints += "=f,";
    constraints += "r,r,r,r,l";
    for (int64_t i = 0; i < accs; ++i)
      constraints += "," + std::to_string(i);
    SmallVector<Value> operands;
    auto vecType = cast<VectorType>(fragment.getType());
    for (int64_t r = 0; r < vecType.getShape()[0]; ++r)
      operands.push_back(LLVM::BitcastOp::create(
          b, i32,
          vector::ExtractOp::create(b, fragment, ArrayRef<int64_t>{r})));
    operands.push_back(arith::AddIOp::create(
        b, bOperand.descriptor,
        arith::ConstantIntOp::create(b,
                                     bOperand.mnMajor
                                         ? mnMajorStepOffset(s)
                                         : kMajorStepOffset(s, bOperand.rows),
                                     64)));
    for (int64_t i = 0; i < accs; ++i)
      operands.push_back(
          LLVM::ExtractValueOp::create(b, acc, ArrayRef<int64_t>{i}));
    acc = LLVM::InlineAsmOp::create(
              b, accType, operands, ptx.str(), constraints,
              /*has_side_effects=*/true, /*is_align_stack=*/false,
              LLVM::TailCallKind::None,
              LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT),
              /*operand_attrs=*/ArrayAttr())
              .getResult(0);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b);
  NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
  return acc;
}

SmallVector<Value> mlir::pisa::detail::accumulatorTiles(ImplicitLocOpBuilder &b,
                                                        Value acc, int64_t n) {
  auto tileType = VectorType::get({2, 2}, b.getF32Type());
  SmallVector<Value> tiles;
  for (int64_t j = 0; j < n / 8; ++j) {
    SmallVector<Value> four;
    for (int64_t e = 0; e < 4; ++e)
      four.push_back(
          LLVM::ExtractValueOp::create(b, acc, ArrayRef<int64_t>{4 * j + e}));
    tiles.push_back(vector::FromElementsOp::create(b, tileType, four));
  }
  return tiles;
}

Value mlir::pisa::detail::accumulatorStruct(ImplicitLocOpBuilder &b,
                                            ArrayRef<Value> tiles) {
  Type f32 = b.getF32Type();
  auto accType = LLVM::LLVMStructType::getLiteral(
      b.getContext(), SmallVector<Type>(4 * tiles.size(), f32));
  Value acc = LLVM::PoisonOp::create(b, accType);
  for (auto [j, tile] : llvm::enumerate(tiles))
    for (int64_t e = 0; e < 4; ++e)
      acc = LLVM::InsertValueOp::create(
          b, acc,
          vector::ExtractOp::create(b, tile, ArrayRef<int64_t>{e / 2, e % 2}),
          ArrayRef<int64_t>{int64_t(4 * j) + e});
  return acc;
}

void mlir::pisa::detail::fenceSharedToTensorCores(ImplicitLocOpBuilder &b) {
  NVVM::FenceProxyOp::create(
      b, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(b.getContext(),
                                 NVVM::SharedSpace::shared_cta));
}
