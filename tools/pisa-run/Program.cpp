//===- Program.cpp - the programs pisa-run compiles -----------------------===//

#include "Program.h"

#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/IR/PisaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace pisatool;

namespace {
/// pisa-run decode's body: the cache gets keys 0 .. offset - 1, then for
/// every query i (position t = offset + i) key t is appended
/// (pisa.pyramid_append) and query i selects over keys 0 .. t and the cache
/// (hier_topk capacity = N): a decode loop, one token per step.
Value buildDecodeLoop(OpBuilder &b, Location loc, Value q, Value k,
                      Value offset, const Problem &p, const SelectConfig &cfg,
                      RankedTensorType selType) {
  auto index = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v).getResult();
  };
  Value zero = index(0), one = index(1);
  Value batch = tensor::DimOp::create(b, loc, q, 0);
  Value numQueries = tensor::DimOp::create(b, loc, q, 2);
  const int64_t rows =
      mlir::pisa::PyramidLayout(p.numKeys, cfg.blockSize, cfg.branching)
          .totalNodes();
  const int64_t any = ShapedType::kDynamic;
  auto cacheType =
      RankedTensorType::get({any, p.kvHeads, rows, p.headDim}, b.getF32Type());
  Value cache = tensor::EmptyOp::create(b, loc, cacheType.getShape(),
                                        b.getF32Type(), ValueRange{batch});
  Value zeroF = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  cache = linalg::FillOp::create(b, loc, ValueRange{zeroF}, ValueRange{cache})
              .getResult(0);
  auto lengths = [&](Value position) -> Value {
    Value v = arith::IndexCastOp::create(b, loc, b.getI32Type(), position);
    return tensor::SplatOp::create(b, loc,
                                   RankedTensorType::get({any}, b.getI32Type()),
                                   v, ValueRange{batch});
  };
  auto append = [&](Value into, Value from, Value to) -> Value {
    return mlir::pisa::PyramidAppendOp::create(
        b, loc, cacheType, k, into, lengths(from), lengths(to),
        /*block_table=*/Value(), cfg.blockSize, cfg.branching);
  };
  // The prompt before the first query.
  cache = append(cache, zero, offset);
  Value out =
      tensor::EmptyOp::create(b, loc, selType.getShape(), b.getI32Type(),
                              ValueRange{batch, numQueries});
  auto loop =
      scf::ForOp::create(b, loc, zero, numQueries, one, ValueRange{cache, out});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value i = loop.getInductionVar();
  Value t = arith::AddIOp::create(b, loc, offset, i);
  Value seen = arith::AddIOp::create(b, loc, t, one);
  Value stepCache = append(loop.getRegionIterArgs()[0], t, seen);
  auto keysType = RankedTensorType::get(
      {any, p.kvHeads, any, p.headDim},
      cast<RankedTensorType>(k.getType()).getElementType());
  auto sizes = [&](ArrayRef<OpFoldResult> v) {
    return SmallVector<OpFoldResult>(v);
  };
  SmallVector<OpFoldResult> unit(4, b.getIndexAttr(1));
  Value prefix = tensor::ExtractSliceOp::create(
      b, loc, keysType, k,
      sizes({b.getIndexAttr(0), b.getIndexAttr(0), b.getIndexAttr(0),
             b.getIndexAttr(0)}),
      sizes(
          {batch, b.getIndexAttr(p.kvHeads), seen, b.getIndexAttr(p.headDim)}),
      unit);
  auto queryType = RankedTensorType::get(
      {any, p.queryHeads, 1, p.headDim},
      cast<RankedTensorType>(q.getType()).getElementType());
  Value query = tensor::ExtractSliceOp::create(
      b, loc, queryType, q,
      sizes({b.getIndexAttr(0), b.getIndexAttr(0), i, b.getIndexAttr(0)}),
      sizes({batch, b.getIndexAttr(p.queryHeads), b.getIndexAttr(1),
             b.getIndexAttr(p.headDim)}),
      unit);
  auto stepType =
      RankedTensorType::get({any, p.kvHeads, 1, cfg.topK}, b.getI32Type());
  Value selected = mlir::pisa::HierTopKOp::create(
      b, loc, stepType, query, prefix, stepCache, t, cfg.topK, cfg.blockSize,
      cfg.branching, b.getF32FloatAttr(cfg.scale), /*schedule=*/nullptr,
      b.getI64IntegerAttr(p.numKeys));
  Value written = tensor::InsertSliceOp::create(
      b, loc, selected, loop.getRegionIterArgs()[1],
      sizes({b.getIndexAttr(0), b.getIndexAttr(0), i, b.getIndexAttr(0)}),
      sizes({batch, b.getIndexAttr(p.kvHeads), b.getIndexAttr(1),
             b.getIndexAttr(cfg.topK)}),
      unit);
  scf::YieldOp::create(b, loc, ValueRange{stepCache, written});
  return loop.getResult(1);
}
} // namespace

OwningOpRef<ModuleOp> pisatool::buildModule(MLIRContext &ctx, const Problem &p,
                                            const SelectConfig &cfg,
                                            Type elemType) {
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  auto module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module.getBody());

  // --static-shapes: the exact sizes of this call instead.
  const int64_t any = ShapedType::kDynamic;
  const int64_t batch = cfg.staticShapes ? p.batch : any;
  const int64_t keys = cfg.staticShapes ? p.numKeys : any;
  const int64_t queries = cfg.staticShapes ? p.numQueries : any;
  const int64_t rows =
      cfg.staticShapes
          ? mlir::pisa::PyramidLayout(p.numKeys, cfg.blockSize, cfg.branching)
                .totalNodes()
          : any;
  // --token-major: [B, T, H, X] for Q, K and the selection.
  auto tokenIndexed = [&](int64_t heads, int64_t tokens, int64_t width,
                          Type elem) {
    if (cfg.tokenMajor)
      return RankedTensorType::get({batch, tokens, heads, width}, elem);
    return RankedTensorType::get({batch, heads, tokens, width}, elem);
  };
  auto qType = tokenIndexed(p.queryHeads, queries, p.headDim, elemType);
  auto kType = tokenIndexed(p.kvHeads, keys, p.headDim, elemType);
  auto pyrType = RankedTensorType::get({batch, p.kvHeads, rows, p.headDim},
                                       b.getF32Type());
  auto selType = tokenIndexed(p.kvHeads, queries, cfg.topK, b.getI32Type());

  // attend: (q, k, v, offset) -> (output, lse, selection).
  auto vType =
      RankedTensorType::get({batch, p.kvHeads, keys, p.valueDim}, elemType);
  auto outType = RankedTensorType::get(
      {batch, p.queryHeads, queries, p.valueDim}, elemType);
  auto lseType =
      RankedTensorType::get({batch, p.queryHeads, queries}, b.getF32Type());
  auto f32Like = [&](RankedTensorType t) {
    return RankedTensorType::get(t.getShape(), b.getF32Type());
  };
  SmallVector<Type> inputs{qType, kType};
  SmallVector<Type> results{selType};
  const bool given = !cfg.selectionInPath.empty();
  if (cfg.attend) {
    inputs.push_back(vType);
    results = {outType, lseType};
    if (cfg.grad())
      results.append({f32Like(qType), f32Like(kType), f32Like(vType)});
    if (!given)
      results.push_back(selType);
  }
  if (given) // (q, k, v, selection, [dO], offset)
    inputs.push_back(selType);
  if (cfg.grad())
    inputs.push_back(outType);
  inputs.push_back(b.getIndexType());
  auto func = func::FuncOp::create(b, loc, "select",
                                   b.getFunctionType(inputs, results));
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  Value offset = entry->getArguments().back();
  if (cfg.decode) {
    func::ReturnOp::create(b, loc,
                           buildDecodeLoop(b, loc, entry->getArgument(0),
                                           entry->getArgument(1), offset, p,
                                           cfg, selType));
    return module;
  }
  // attention over `selection`, and its gradient with dO: the results.
  auto attend = [&](Value selection) -> SmallVector<Value> {
    auto attention = mlir::pisa::SparseAttentionOp::create(
        b, loc, TypeRange{outType, lseType}, entry->getArgument(0),
        entry->getArgument(1), entry->getArgument(2), selection, offset,
        cfg.blockSize, b.getF32FloatAttr(cfg.scale));
    SmallVector<Value> values(attention.getResults());
    if (cfg.grad()) {
      Value gradOutput = entry->getArgument(entry->getNumArguments() - 2);
      auto grad = mlir::pisa::SparseAttentionGradOp::create(
          b, loc, TypeRange{f32Like(qType), f32Like(kType), f32Like(vType)},
          entry->getArgument(0), entry->getArgument(1), entry->getArgument(2),
          selection, offset, attention.getOutput(), attention.getLse(),
          gradOutput, cfg.blockSize, b.getF32FloatAttr(cfg.scale));
      llvm::append_range(values, grad.getResults());
    }
    return values;
  };
  if (given) {
    func::ReturnOp::create(b, loc, attend(entry->getArgument(3)));
    return module;
  }
  Value pyramid = mlir::pisa::PyramidBuildOp::create(
      b, loc, pyrType, entry->getArgument(1), cfg.blockSize, cfg.branching,
      cfg.tokenMajor);
  auto select = mlir::pisa::HierTopKOp::create(
      b, loc, selType, entry->getArgument(0), entry->getArgument(1), pyramid,
      offset, cfg.topK, cfg.blockSize, cfg.branching,
      b.getF32FloatAttr(cfg.scale), /*schedule=*/nullptr, /*capacity=*/nullptr,
      cfg.tokenMajor);
  if (!cfg.attend) {
    func::ReturnOp::create(b, loc, select.getResult());
    return module;
  }
  SmallVector<Value> values = attend(select.getResult());
  values.push_back(select.getResult());
  func::ReturnOp::create(b, loc, values);
  return module;
}
