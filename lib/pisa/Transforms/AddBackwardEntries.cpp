//===- AddBackwardEntries.cpp - Training entry points of attention --------===//
//
// An entry point whose result is a pisa.sparse_attention's output gets a
// forward that also returns what the backward needs (lse, and the selection
// it computed) and a backward applying pisa.sparse_attention_grad, so that
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

/// The attention whose output `func` returns, when its queries, keys and
/// values are `func`'s arguments and it has not been given training entry
/// points already; else null.
SparseAttentionOp attentionEntry(func::FuncOp func) {
  if (func.isPrivate() || func.isExternal() || !func.getBody().hasOneBlock() ||
      func.getNumResults() != 1 || func->hasAttr("pisa.backward") ||
      func->hasAttr("pisa.no_backward"))
    return nullptr;
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  auto attention = ret.getOperand(0).getDefiningOp<SparseAttentionOp>();
  if (!attention || ret.getOperand(0) != attention.getOutput())
    return nullptr;
  for (Value v :
       {attention.getQueries(), attention.getKeys(), attention.getValues()}) {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != &func.getBody().front())
      return nullptr;
  }
  return attention;
}

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
                          SparseAttentionOp attention, StringRef name) {
  bool returnsSelection = !isArgumentOf(func, attention.getSelection());
  SmallVector<Type> results = {attention.getOutput().getType(),
                               attention.getLse().getType()};
  SmallVector<StringRef> names = {"o", "lse"};
  if (returnsSelection) {
    results.push_back(attention.getSelection().getType());
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
  SmallVector<Value> returned = {map.lookup(attention.getOutput()),
                                 map.lookup(attention.getLse())};
  if (returnsSelection)
    returned.push_back(map.lookup(attention.getSelection()));
  func::ReturnOp::create(fb, func.getLoc(), returned);
  return forward;
}

/// F_backward(F's arguments[, selection], o, lse, dO) -> (dq, dk, dv): the
/// ops of F that the attention's offset needs, then the gradient.
func::FuncOp buildBackward(OpBuilder &b, func::FuncOp func,
                           SparseAttentionOp attention, StringRef name) {
  bool takesSelection = !isArgumentOf(func, attention.getSelection());
  SmallVector<Type> inputs(func.getArgumentTypes());
  if (takesSelection)
    inputs.push_back(attention.getSelection().getType());
  Type output = attention.getOutput().getType();
  inputs.append({output, attention.getLse().getType(), output});
  SmallVector<Type> grads = {attention.getQueries().getType(),
                             attention.getKeys().getType(),
                             attention.getValues().getType()};
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
  // The offset: an argument, or what F computes it from (pure ops on
  // sizes and constants: the verifier of the gradient checks the rest).
  SetVector<Operation *> needed;
  SmallVector<Value> work = {attention.getQueryOffset()};
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
                                   : map.lookup(attention.getSelection());
  Value o = body.getArgument(next), lse = body.getArgument(next + 1),
        gradOutput = body.getArgument(next + 2);
  auto grad = SparseAttentionGradOp::create(
      bb, func.getLoc(), grads, map.lookup(attention.getQueries()),
      map.lookup(attention.getKeys()), map.lookup(attention.getValues()),
      selection, map.lookupOrDefault(attention.getQueryOffset()), o, lse,
      gradOutput, attention.getBlockSizeAttr(), attention.getScaleAttr(),
      attention.getTokenMajorAttr());
  func::ReturnOp::create(bb, func.getLoc(), grad.getResults());
  return backward;
}

struct PisaAddBackwardEntriesPass
    : public pisa::impl::PisaAddBackwardEntriesBase<
          PisaAddBackwardEntriesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<func::FuncOp, SparseAttentionOp>> entries;
    for (auto func : module.getOps<func::FuncOp>())
      if (SparseAttentionOp attention = attentionEntry(func))
        entries.push_back({func, attention});
    for (auto [func, attention] : entries)
      if (failed(addEntries(module, func, attention)))
        return signalPassFailure();
  }

  LogicalResult addEntries(ModuleOp module, func::FuncOp func,
                           SparseAttentionOp attention) {
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
        return attention.emitOpError("has no GPU backward: ") << *why;
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
             b.getNamedAttr("inputs", b.getDenseI64ArrayAttr(
                                          {index(attention.getQueries()),
                                           index(attention.getKeys()),
                                           index(attention.getValues())})),
             b.getNamedAttr("token_major",
                            b.getBoolAttr(attention.getTokenMajor()))}));
    return success();
  }
};
} // namespace
