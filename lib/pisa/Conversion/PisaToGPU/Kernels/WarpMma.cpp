//===- WarpMma.cpp - One warp's mma.sync fragments from shared tiles ------===//

#include "Kernels/WarpMma.h"
#include "Kernels/KernelBuilder.h"

#include "../Common/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::pisa::detail;

Value WarpFragments::loadA(ImplicitLocOpBuilder &b, Value tile, Value row0,
                           Value col0) const {
  // Lanes 0-15 address rows 0-15 at column 0, lanes 16-31 at column 8: the
  // four 8x8 matrices a0 (rows 0-7), a1 (8-15), a2, a3 (the same, k 8-15).
  Value row = arith::AddIOp::create(
      b, row0, arith::RemUIOp::create(b, lane, indexConst(b, 16)));
  Value col = arith::AddIOp::create(
      b, col0,
      arith::MulIOp::create(b,
                            arith::DivUIOp::create(b, lane, indexConst(b, 16)),
                            indexConst(b, 8)));
  return nvgpu::LdMatrixOp::create(b, VectorType::get({4, 2}, elem), tile,
                                   ValueRange{row, col}, /*transpose=*/false,
                                   /*numTiles=*/4);
}

Value WarpFragments::loadBFromNK(ImplicitLocOpBuilder &b, Value tile, Value n0,
                                 Value k0) const {
  // Lanes 0-7 address rows n0.. at k0, lanes 8-15 at k0 + 8 (the others'
  // addresses are not read but stay in the tile).
  Value row = arith::AddIOp::create(
      b, n0, arith::RemUIOp::create(b, lane, indexConst(b, 8)));
  Value half = arith::RemUIOp::create(
      b, arith::DivUIOp::create(b, lane, indexConst(b, 8)), indexConst(b, 2));
  Value col = arith::AddIOp::create(
      b, k0, arith::MulIOp::create(b, half, indexConst(b, 8)));
  return nvgpu::LdMatrixOp::create(b, VectorType::get({2, 2}, elem), tile,
                                   ValueRange{row, col}, /*transpose=*/false,
                                   /*numTiles=*/2);
}

Value WarpFragments::loadBFromKN(ImplicitLocOpBuilder &b, Value tile, Value k0,
                                 Value n0) const {
  Value row = arith::AddIOp::create(
      b, k0, arith::RemUIOp::create(b, lane, indexConst(b, 16)));
  return nvgpu::LdMatrixOp::create(b, VectorType::get({2, 2}, elem), tile,
                                   ValueRange{row, n0}, /*transpose=*/true,
                                   /*numTiles=*/2);
}

SmallVector<Value> WarpFragments::productNT(ImplicitLocOpBuilder &b, Value a,
                                            Value aRow0, Value bTile,
                                            Value bRow0, int64_t k,
                                            int64_t nTiles) const {
  auto accType = VectorType::get({2, 2}, b.getF32Type());
  SmallVector<Value> acc(
      nTiles, arith::ConstantOp::create(b, accType, b.getZeroAttr(accType)));
  for (int64_t s = 0; s < k / kMmaK; ++s) {
    Value k0 = indexConst(b, s * kMmaK);
    Value aFrag = loadA(b, a, aRow0, k0);
    for (int64_t t = 0; t < nTiles; ++t) {
      Value n0 = arith::AddIOp::create(b, bRow0, indexConst(b, t * kMmaCols));
      acc[t] = nvgpu::MmaSyncOp::create(b, aFrag, loadBFromNK(b, bTile, n0, k0),
                                        acc[t], ArrayRef<int64_t>{16, 8, 16});
    }
  }
  return acc;
}

Value WarpFragments::accumulateKN(ImplicitLocOpBuilder &b, Value a, Value bTile,
                                  Value k0, int64_t n0, Value acc) const {
  return nvgpu::MmaSyncOp::create(b, a,
                                  loadBFromKN(b, bTile, k0, indexConst(b, n0)),
                                  acc, ArrayRef<int64_t>{16, 8, 16});
}

Value WarpFragments::accumulatorsAsA(
    ImplicitLocOpBuilder &b, ArrayRef<SmallVector<Value>> values) const {
  auto pairType = VectorType::get({2}, elem);
  auto pair = [&](int64_t half, int64_t t) -> Value {
    Value v = vector::FromElementsOp::create(
        b, VectorType::get({2}, b.getF32Type()),
        ValueRange{values[t][2 * half], values[t][2 * half + 1]});
    return arith::TruncFOp::create(b, pairType, v);
  };
  // a0 a1: row g, k 2i..; a2 a3: row g + 8; a4 .. a7: the same at k + 8.
  return mmaFragment(b, {pair(0, 0), pair(1, 0), pair(0, 1), pair(1, 1)});
}
