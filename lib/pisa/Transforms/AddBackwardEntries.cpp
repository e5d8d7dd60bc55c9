//===- AddBackwardEntries.cpp - Training entry points of attention --------===//
//
// An entry point whose result is a pisa.sparse_attention's (or
// pisa.sparse_attention_varlen's) output gets a forward that also returns
// what the backward needs (lse, and the selection it computed) and a
// backward applying pisa.sparse_attention_grad (or _grad_varlen), so that
// an AOT library can serve a differentiable op (docs/gpu.md, "Training
// entry points").
//
//===----------------------------------------------------------------------===//

#include "pisa/IR/PisaDialect.h"
#include "pisa/IR/PisaInterfaces.h"
#include "pisa/IR/PisaOps.h"
#include "pisa/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::pisa {
#define GEN_PASS_DEF_PISAADDBACKWARDENTRIES
#include "pisa/Transforms/Passes.h.inc"
} // namespace mlir::pisa

using namespace mlir;
using namespace mlir::pisa;

namespace {

/// The attention (batched or packed) whose output `func` returns, when its
/// queries, keys and values are `func`'s arguments and it has not been
/// given training entry points already; else null.
Operation *attentionEntry(func::FuncOp func) {
  if (func.isPrivate() || func.isExternal() || !func.getBody().hasOneBlock() ||
      func.getNumResults() != 1 || func->hasAttr("pisa.backward") ||
      func->hasAttr("pisa.no_backward"))
    return nullptr;
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  Operation *attention = ret.getOperand(0).getDefiningOp();
  if (!isa_and_nonnull<SparseAttentionOp, SparseAttentionVarlenOp>(attention) ||
      ret.getOperand(0) != attention->getResult(0))
    return nullptr;
  for (Value v : attention->getOperands().take_front(3)) {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != &func.getBody().front())
      return nullptr;
  }
  return attention;
}

/// What the training entries need of an attention op of either form.
struct Attention {
  Operation *op;
  Value queries, keys, values, selection, output, lse;
  /// The operands besides those that F's ops compute (the offset, or the
  /// cu_seqlens).
  SmallVector<Value> sizes;
  bool tokenMajor;

  explicit Attention(Operation *op) : op(op) {
    if (auto batched = dyn_cast<SparseAttentionOp>(op)) {
      sizes = {batched.getQueryOffset()};
      tokenMajor = batched.getTokenMajor();
      selection = batched.getSelection();
    } else {
      auto packed = cast<SparseAttentionVarlenOp>(op);
      sizes = {packed.getCuSeqlensQ(), packed.getCuSeqlensK()};
      tokenMajor = true;
      selection = packed.getSelection();
    }
    queries = op->getOperand(0);
    keys = op->getOperand(1);
    values = op->getOperand(2);
    output = op->getResult(0);
    lse = op->getResult(1);
  }

  /// The gradient op of this attention on mapped operands.
  ValueRange createGrad(OpBuilder &b, TypeRange grads, IRMapping &map,
                        Value selection, Value o, Value lse,
                        Value gradOutput) const {
    Location loc = op->getLoc();
    Value q = map.lookup(queries), k = map.lookup(keys), v = map.lookup(values);
    if (auto batched = dyn_cast<SparseAttentionOp>(op))
      return SparseAttentionGradOp::create(
                 b, loc, grads, q, k, v, selection,
                 map.lookupOrDefault(batched.getQueryOffset()), o, lse,
                 gradOutput, batched.getBlockSizeAttr(), batched.getScaleAttr(),
                 batched.getTokenMajorAttr())
          .getResults();
    auto packed = cast<SparseAttentionVarlenOp>(op);
    return SparseAttentionGradVarlenOp::create(
               b, loc, grads, q, k, v, selection,
               map.lookupOrDefault(packed.getCuSeqlensQ()),
               map.lookupOrDefault(packed.getCuSeqlensK()), o, lse, gradOutput,
               packed.getBlockSizeAttr(), packed.getScaleAttr())
        .getResults();
  }
};

bool isArgumentOf(func::FuncOp func, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && arg.getOwner() == &func.getBody().front();
}

/// A public function `name` of `type` beside `func`, with `names` as its
/// results' pisa.name.
func::FuncOp createEntry(OpBuilder &b, func::FuncOp func, StringRef name,
                         FunctionType type, ArrayRef<StringRef> names) {
  auto entry = func::FuncOp::create(b, func.getLoc(), name, type);
  for (auto [i, n] : llvm::enumerate(names))
    entry.setResultAttr(i, "pisa.name", b.getStringAttr(n));
  entry.addEntryBlock();
  return entry;
}

/// F_forward: F's body returning the attention's output, lse and (when F
/// computes it) selection.
func::FuncOp buildForward(OpBuilder &b, func::FuncOp func,
                          const Attention &attention, StringRef name) {
  bool returnsSelection = !isArgumentOf(func, attention.selection);
  SmallVector<Type> results = {attention.output.getType(),
                               attention.lse.getType()};
  SmallVector<StringRef> names = {"o", "lse"};
  if (returnsSelection) {
    results.push_back(attention.selection.getType());
    names.push_back("selection");
  }
  auto forward =
      createEntry(b, func, name,
                  b.getFunctionType(func.getArgumentTypes(), results), names);
  IRMapping map;
  map.map(func.getArguments(), forward.getArguments());
  OpBuilder fb = OpBuilder::atBlockBegin(&forward.getBody().front());
  for (Operation &op : func.getBody().front().without_terminator())
    fb.clone(op, map);
  SmallVector<Value> returned = {map.lookup(attention.output),
                                 map.lookup(attention.lse)};
  if (returnsSelection)
    returned.push_back(map.lookup(attention.selection));
  func::ReturnOp::create(fb, func.getLoc(), returned);
  return forward;
}

/// F_backward(F's arguments[, selection], o, lse, dO) -> (dq, dk, dv): the
/// ops of F that the attention's offset (or cu_seqlens) needs, then the
/// gradient.
func::FuncOp buildBackward(OpBuilder &b, func::FuncOp func,
                           const Attention &attention, StringRef name) {
  bool takesSelection = !isArgumentOf(func, attention.selection);
  SmallVector<Type> inputs(func.getArgumentTypes());
  if (takesSelection)
    inputs.push_back(attention.selection.getType());
  Type output = attention.output.getType();
  inputs.append({output, attention.lse.getType(), output});
  SmallVector<Type> grads = {attention.queries.getType(),
                             attention.keys.getType(),
                             attention.values.getType()};
  auto backward = createEntry(b, func, name, b.getFunctionType(inputs, grads),
                              {"dq", "dk", "dv"});
  // The added arguments' names (pisa-compile's header takes F's own names
  // for the others).
  SmallVector<StringRef> added = {"o", "lse", "grad_o"};
  if (takesSelection)
    added.insert(added.begin(), "selection");
  for (auto [i, n] : llvm::enumerate(added))
    backward.setArgAttr(func.getNumArguments() + i, "pisa.name",
                        b.getStringAttr(n));
  Block &body = backward.getBody().front();
  IRMapping map;
  map.map(func.getArguments(),
          body.getArguments().take_front(func.getNumArguments()));
  OpBuilder bb = OpBuilder::atBlockBegin(&body);
  // The offset or cu_seqlens: arguments, or what F computes them from
  // (pure ops on sizes and constants: the verifier of the gradient checks
  // the rest).
  SetVector<Operation *> needed;
  SmallVector<Value> work(attention.sizes);
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (def && needed.insert(def))
      llvm::append_range(work, def->getOperands());
  }
  for (Operation &op : func.getBody().front())
    if (needed.contains(&op))
      bb.clone(op, map);
  unsigned next = func.getNumArguments();
  Value selection = takesSelection ? body.getArgument(next++)
                                   : map.lookup(attention.selection);
  Value o = body.getArgument(next), lse = body.getArgument(next + 1),
        gradOutput = body.getArgument(next + 2);
  ValueRange results =
      attention.createGrad(bb, grads, map, selection, o, lse, gradOutput);
  func::ReturnOp::create(bb, func.getLoc(), results);
  return backward;
}

struct PisaAddBackwardEntriesPass
    : public pisa::impl::PisaAddBackwardEntriesBase<
          PisaAddBackwardEntriesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<func::FuncOp, Operation *>> entries;
    for (auto func : module.getOps<func::FuncOp>())
      if (Operation *attention = attentionEntry(func))
        entries.push_back({func, attention});
    for (auto [func, attention] : entries)
      if (failed(addEntries(module, func, attention)))
        return signalPassFailure();
  }

  LogicalResult addEntries(ModuleOp module, func::FuncOp func, Operation *op) {
    Attention attention(op);
    std::string forwardName = (func.getSymName() + "_forward").str();
    std::string backwardName = (func.getSymName() + "_backward").str();
    for (const std::string &name : {forwardName, backwardName})
      if (module.lookupSymbol(name))
        return func.emitError("cannot add the training entry point @")
               << name << ": a symbol of that name exists";
    OpBuilder b(func);
    b.setInsertionPointAfter(func);
    func::FuncOp backward = buildBackward(b, func, attention, backwardName);
    std::optional<std::string> why;
    backward.walk([&](KernelLoweringOpInterface op) {
      if (!why)
        why = op.getGPULimitViolation();
    });
    if (why) {
      backward.erase();
      if (require)
        return op->emitOpError("has no GPU backward: ") << *why;
      func->setAttr("pisa.no_backward", b.getStringAttr(*why));
      return success();
    }
    b.setInsertionPoint(backward);
    buildForward(b, func, attention, forwardName);
    auto index = [&](Value v) {
      return int64_t(cast<BlockArgument>(v).getArgNumber());
    };
    func->setAttr(
        "pisa.backward",
        b.getDictionaryAttr(
            {b.getNamedAttr("forward", FlatSymbolRefAttr::get(b.getContext(),
                                                              forwardName)),
             b.getNamedAttr("backward", FlatSymbolRefAttr::get(b.getContext(),
                                                               backwardName)),
             b.getNamedAttr("inputs",
                            b.getDenseI64ArrayAttr({index(attention.queries),
                                                    index(attention.keys),
                                                    index(attention.values)})),
             b.getNamedAttr("token_major",
                            b.getBoolAttr(attention.tokenMajor))}));
    return success();
  }
};
} // namespace
