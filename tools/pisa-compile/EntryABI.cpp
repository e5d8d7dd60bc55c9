//===- EntryABI.cpp - The C entry points of an AOT library ----------------===//

#include "EntryABI.h"

#include "pisa/Runtime/EntryTable.h"
#include "pisa/Support/Errors.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace pisatool;
namespace rt = ::pisa::runtime;
using mlir::pisa::invalidInput;

/// The operations of `entry`'s body that `roots` depend on (whole
/// top-level operations, with what their regions use from above).
static llvm::SetVector<Operation *> sliceOf(func::FuncOp entry,
                                            ArrayRef<Value> roots) {
  Block &body = entry.getBody().front();
  llvm::SetVector<Operation *> slice;
  SmallVector<Value> work(roots.begin(), roots.end());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def)
      continue; // an argument of the entry (or of a sliced op's region)
    Operation *top = body.findAncestorOpInBlock(*def);
    if (!top || !slice.insert(top))
      continue;
    top->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        Operation *owner = operand.getDefiningOp();
        if (!owner)
          owner = operand.getParentBlock()->getParentOp();
        if (!top->isAncestor(owner))
          work.push_back(operand);
      }
    });
  }
  return slice;
}

/// A function of the entry's arguments computing one index from `roots`
/// (combined by `combine`): the slice of the entry that they depend on,
/// cloned. Fails when the slice reads memory or launches work.
static FailureOr<func::FuncOp> buildQuery(
    func::FuncOp entry, StringRef name, ArrayRef<Value> roots,
    llvm::function_ref<Value(OpBuilder &, Location, ArrayRef<Value>)> combine) {
  llvm::SetVector<Operation *> slice = sliceOf(entry, roots);
  for (Operation *op : slice)
    if (!isMemoryEffectFree(op))
      return op->emitError("a size or a rule of the entry point depends on "
                           "this operation, which is not a pure computation "
                           "on sizes"),
             failure();
  OpBuilder b(entry);
  Location loc = entry.getLoc();
  auto query = func::FuncOp::create(
      b, loc, name,
      b.getFunctionType(entry.getArgumentTypes(), {b.getIndexType()}));
  query->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *block = query.addEntryBlock();
  OpBuilder qb = OpBuilder::atBlockBegin(block);
  IRMapping map;
  map.map(entry.getArguments(), block->getArguments());
  for (Operation &op : entry.getBody().front())
    if (slice.contains(&op))
      qb.clone(op, map);
  SmallVector<Value> mapped;
  for (Value root : roots)
    mapped.push_back(map.lookupOrDefault(root));
  func::ReturnOp::create(qb, loc, combine(qb, loc, mapped));
  return query;
}

/// (argument, dimension) when `size` is the size of an entry argument
/// (through views of it), else (-1, -1): callers can then size the result
/// from the inputs' shapes.
static std::pair<int64_t, int64_t> argumentSize(Value size) {
  auto dim = size.getDefiningOp<memref::DimOp>();
  std::optional<int64_t> index = dim ? dim.getConstantIndex() : std::nullopt;
  if (!index)
    return {-1, -1};
  Value source = dim.getSource();
  while (Operation *def = source.getDefiningOp()) {
    if (!isa<memref::CastOp, bufferization::ToBufferOp>(def))
      return {-1, -1};
    source = def->getOperand(0);
  }
  auto arg = dyn_cast<BlockArgument>(source);
  if (!arg || !isa<FunctionOpInterface>(arg.getOwner()->getParentOp()))
    return {-1, -1};
  return {arg.getArgNumber(), *index};
}

static Value indexConstant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

llvm::Error pisatool::planEntryPoints(ModuleOp module, Manifest &manifest) {
  for (EntryPoint &e : manifest.entryPoints) {
    auto func = module.lookupSymbol<func::FuncOp>(e.function);
    if (!func || !func.getBody().hasOneBlock())
      return invalidInput(
          "entry point @" + e.function +
          ": expected one block of host code after bufferization");
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    // Each result becomes the caller's buffer, written in place; its
    // dynamic sizes must be the ones the program computes.
    const unsigned index = func.getNumArguments();
    SmallVector<gpu::AllocOp> results;
    for (auto [i, returned] : llvm::enumerate(ret.getOperands())) {
      auto result = returned.getDefiningOp<gpu::AllocOp>();
      if (!result || result->getBlock() != &body ||
          !result.getAsyncDependencies().empty() ||
          result.getType().getElementTypeBitWidth() % 8)
        return invalidInput(
            "entry point @" + e.function + ": its " + e.results[i].name +
            " must be a device buffer that its kernels write (it "
            "returns an input or a value computed on the host)");
      if (llvm::is_contained(results, result))
        return invalidInput(
            "entry point @" + e.function + ": " + e.results[i].name +
            " is the buffer of an earlier result (a result returned "
            "twice)");
      results.push_back(result);
      Argument &r = e.results[i];
      r.sizeFrom.clear();
      for (Value size : result.getDynamicSizes())
        r.sizeFrom.push_back(argumentSize(size));
      if (failed(func.insertArgument(index + i, result.getType(), {},
                                     result.getLoc())))
        return invalidInput("entry point @" + e.function +
                            ": cannot rewrite its results");
    }
    for (auto [i, result] : llvm::enumerate(results)) {
      Value out = func.getArgument(index + i);
      OpBuilder b(result);
      Location loc = result.getLoc();
      unsigned k = 0;
      for (auto [r, size] : llvm::enumerate(result.getType().getShape())) {
        if (!ShapedType::isDynamic(size))
          continue;
        Value given = memref::DimOp::create(b, loc, out, r);
        Value same =
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, given,
                                  result.getDynamicSizes()[k++]);
        cf::AssertOp::create(b, loc, same,
                             e.results[i].name + "_dim" + std::to_string(r) +
                                 " is not the size the inputs give");
      }
      result.getMemref().replaceAllUsesWith(out);
      result.erase();
    }
    llvm::BitVector all(func.getNumResults(), true);
    if (failed(func.eraseResults(all)))
      return invalidInput("entry point @" + e.function +
                          ": cannot rewrite its results");
    OpBuilder b(ret);
    func::ReturnOp::create(b, ret.getLoc());
    ret.erase();

    // Rules on sizes (cf.assert of the lowerings): checked by the wrapper
    // before anything is enqueued, then dropped from the call.
    SmallVector<cf::AssertOp> asserts;
    WalkResult nested = func.walk([&](cf::AssertOp op) {
      if (op->getParentOp() != func)
        return WalkResult::interrupt();
      asserts.push_back(op);
      return WalkResult::advance();
    });
    if (nested.wasInterrupted())
      return invalidInput("entry point @" + e.function +
                          ": a rule on sizes inside control flow");
    SmallVector<Value> conditions;
    for (cf::AssertOp op : asserts) {
      conditions.push_back(op.getArg());
      e.rules.push_back(op.getMsg().str());
    }
    if (!conditions.empty()) {
      auto check = buildQuery(
          func, "__pisa_check_" + e.function, conditions,
          [](OpBuilder &qb, Location loc, ArrayRef<Value> holds) -> Value {
            // The first rule that fails, 1-based; 0 when all hold.
            Value first = indexConstant(qb, loc, 0);
            for (int64_t i = int64_t(holds.size()) - 1; i >= 0; --i)
              first = arith::SelectOp::create(qb, loc, holds[i], first,
                                              indexConstant(qb, loc, i + 1));
            return first;
          });
      if (failed(check))
        return invalidInput(
            "entry point @" + e.function +
            ": its rules on sizes cannot be checked before a call");
    }
    for (cf::AssertOp op : asserts)
      op.erase();

    // Everything else it allocates comes from the workspace, in order.
    SmallVector<gpu::AllocOp> allocs;
    bool staticWorkspace = true;
    WalkResult walk = func.walk([&](gpu::AllocOp alloc) {
      if (alloc->getParentOp() != func ||
          alloc.getType().getElementTypeBitWidth() % 8 ||
          !alloc.getType().getLayout().isIdentity()) {
        alloc.emitError("a device buffer inside control flow or of a "
                        "non-contiguous type: the workspace cannot be planned");
        return WalkResult::interrupt();
      }
      allocs.push_back(alloc);
      staticWorkspace &= alloc.getType().hasStaticShape();
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return invalidInput(
          "entry point @" + e.function +
          ": the workspace cannot be planned (a device buffer inside "
          "control flow or of a non-contiguous type)");
    if (staticWorkspace) {
      int64_t bytes = 0;
      for (gpu::AllocOp alloc : allocs)
        bytes +=
            rt::alignWorkspace(alloc.getType().getNumElements() *
                               alloc.getType().getElementTypeBitWidth() / 8);
      e.workspaceBytes = bytes;
      continue;
    }
    SmallVector<Value> sizes;
    for (gpu::AllocOp alloc : allocs)
      llvm::append_range(sizes, alloc.getDynamicSizes());
    auto workspace = buildQuery(
        func, "__pisa_workspace_" + e.function, sizes,
        [&](OpBuilder &qb, Location loc, ArrayRef<Value> dynamic) -> Value {
          // Sum of each buffer's bytes rounded up to the alignment, in
          // checked arithmetic: any step past 2^63 - 1 (or a negative
          // size) makes the result -1, which the caller turns into
          // SIZE_MAX, a workspace no call has.
          ImplicitLocOpBuilder cb(loc, qb);
          Value zero = indexConstant(qb, loc, 0);
          Value failed = indexConstant(qb, loc, -1);
          auto nonNegative = [&](Value v) {
            return arith::CmpIOp::create(cb, arith::CmpIPredicate::sge, v,
                                         zero);
          };
          // `result` where the operands and `result` are all >= 0 (and
          // `exact`), else -1.
          auto checked = [&](Value x, Value y, Value result,
                             Value exact) -> Value {
            Value ok = arith::AndIOp::create(
                cb, arith::AndIOp::create(cb, nonNegative(x), nonNegative(y)),
                arith::AndIOp::create(cb, nonNegative(result), exact));
            return arith::SelectOp::create(cb, ok, result, failed);
          };
          auto checkedMul = [&](Value x, Value y) -> Value {
            // Exact when the high word of the 128-bit product is 0.
            auto product = arith::MulSIExtendedOp::create(cb, x, y);
            return checked(x, y, product.getLow(),
                           arith::CmpIOp::create(cb, arith::CmpIPredicate::eq,
                                                 product.getHigh(), zero));
          };
          auto checkedAdd = [&](Value x, Value y) -> Value {
            return checked(x, y, arith::AddIOp::create(cb, x, y),
                           arith::ConstantIntOp::create(cb, 1, 1));
          };
          Value total = zero;
          Value align = indexConstant(qb, loc, rt::kWorkspaceAlignment);
          size_t next = 0;
          for (gpu::AllocOp alloc : allocs) {
            MemRefType t = alloc.getType();
            Value bytes =
                indexConstant(qb, loc, t.getElementTypeBitWidth() / 8);
            for (int64_t size : t.getShape())
              bytes = checkedMul(bytes, ShapedType::isDynamic(size)
                                            ? dynamic[next++]
                                            : indexConstant(qb, loc, size));
            // Rounded up (a product past 2^63 - 1 turns negative, which
            // checkedAdd refuses).
            Value rounded = arith::MulIOp::create(
                qb, loc, arith::CeilDivSIOp::create(qb, loc, bytes, align),
                align);
            total =
                checkedAdd(total, arith::SelectOp::create(
                                      cb, nonNegative(bytes), rounded, failed));
          }
          return total;
        });
    if (failed(workspace))
      return invalidInput(
          "entry point @" + e.function +
          ": its workspace size cannot be computed before a call");
    // pisa_F_workspace_size takes the inputs' sizes only.
    for (BlockArgument arg : workspace->getArguments())
      if (!arg.use_empty() &&
          (arg.getArgNumber() >= index || arg.getType().isIndex()))
        return invalidInput(
            "entry point @" + e.function + ": its workspace size depends on " +
            (arg.getArgNumber() >= index ? "a result's sizes"
                                         : "an index argument") +
            ", not only on the inputs' sizes");
    e.workspaceBytes = rt::kDynamicSize;
  }
  return llvm::Error::success();
}

/// The entry table of EntryTable.h.
static llvm::Expected<SmallVector<int64_t>> entryTable(const EntryPoint &e) {
  SmallVector<int64_t> table = {rt::kEntryTableVersion,
                                int64_t(e.arguments.size() + e.results.size()),
                                e.workspaceBytes};
  auto add = [&](const Argument &a, int64_t kind) -> llvm::Error {
    if (int64_t(a.shape.size()) > rt::kMaxRank)
      return invalidInput("entry point @" + e.function + ": " + a.name +
                          " has rank above " + std::to_string(rt::kMaxRank));
    table.append({kind, int64_t(a.shape.size()),
                  kind == rt::kIndex ? a.lowest : 0,
                  kind == rt::kIndex ? a.highest : 0});
    for (int64_t r = 0; r < rt::kMaxRank; ++r) {
      int64_t size = r < int64_t(a.shape.size()) ? a.shape[r] : 0;
      table.push_back(ShapedType::isDynamic(size) ? rt::kDynamicSize : size);
    }
    int64_t roles = 0;
    for (const std::string &role : a.roles)
      roles |= rt::roleBit(llvm::StringSwitch<rt::ArgRole>(role)
                               .Case("cu_seqlens_q", rt::kCuSeqlensQ)
                               .Case("cu_seqlens_k", rt::kCuSeqlensK)
                               .Case("seq_lens", rt::kSeqLens)
                               .Case("from", rt::kAppendFrom)
                               .Case("to", rt::kAppendTo)
                               .Case("block_table", rt::kBlockTable)
                               .Default(rt::kNoRole));
    table.push_back(roles);
    table.push_back(a.rowsArg);
    table.push_back(a.capacity);
    table.push_back(llvm::StringSwitch<int64_t>(a.dtype)
                        .Cases({"f32", "i32"}, 4)
                        .Cases({"f16", "bf16"}, 2)
                        .Default(0));
    return llvm::Error::success();
  };
  for (const Argument &a : e.arguments)
    if (llvm::Error err = add(a, a.kind == "index" ? rt::kIndex : rt::kInput))
      return std::move(err);
  for (const Argument &r : e.results)
    if (llvm::Error err = add(r, rt::kResult))
      return std::move(err);
  return table;
}

namespace {
/// Builds one entry's wrapper in the LLVM dialect.
struct WrapperBuilder {
  ModuleOp module;
  OpBuilder b;
  Location loc;
  Type ptr, i8, i32, i64;

  explicit WrapperBuilder(ModuleOp module)
      : module(module), b(module.getBodyRegion()), loc(module.getLoc()) {
    MLIRContext *ctx = module.getContext();
    ptr = LLVM::LLVMPointerType::get(ctx);
    i8 = IntegerType::get(ctx, 8);
    i32 = IntegerType::get(ctx, 32);
    i64 = IntegerType::get(ctx, 64);
    b.setInsertionPointToEnd(module.getBody());
  }

  LLVM::LLVMFuncOp declare(StringRef name, Type result, ArrayRef<Type> args) {
    if (auto f = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
      return f;
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToEnd(module.getBody());
    return LLVM::LLVMFuncOp::create(b, loc, name,
                                    LLVM::LLVMFunctionType::get(result, args));
  }

  Value constant(OpBuilder &fb, Type type, int64_t v) {
    return LLVM::ConstantOp::create(fb, loc, type, fb.getIntegerAttr(type, v));
  }

  Value global(OpBuilder &fb, StringRef name, StringRef bytes) {
    auto type = LLVM::LLVMArrayType::get(i8, bytes.size());
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToEnd(module.getBody());
      LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/true,
                             LLVM::Linkage::Internal, name,
                             b.getStringAttr(bytes));
    }
    return LLVM::AddressOfOp::create(fb, loc, ptr, name);
  }

  /// The C parameters of an argument: its value, then its dynamic sizes.
  void appendParams(const Argument &a, SmallVector<Type> &params) {
    params.push_back(a.kind == "index" ? i64 : ptr);
    params.append(a.sizeParams().size(), i64);
  }

  /// The lowered function's operands (descriptors, index values) from the
  /// values array and the descriptors buffer.
  struct CallFrame {
    Value values, descriptors;
    SmallVector<Value> operands;
  };
  CallFrame frame(OpBuilder &fb, const EntryPoint &e, ValueRange params) {
    const int64_t numArgs = int64_t(e.arguments.size() + e.results.size());
    CallFrame frame;
    Value one = constant(fb, i64, 1);
    frame.values = LLVM::AllocaOp::create(
        fb, loc, ptr, LLVM::LLVMArrayType::get(ptr, params.size()), one, 8);
    for (auto [i, v] : llvm::enumerate(params)) {
      Value slot = LLVM::GEPOp::create(fb, loc, ptr, ptr, frame.values,
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
      if (v.getType() == i64)
        v = LLVM::IntToPtrOp::create(fb, loc, ptr, v);
      LLVM::StoreOp::create(fb, loc, v, slot);
    }
    int64_t descriptorBytes = 0;
    SmallVector<int64_t> offsets;
    for (int64_t i = 0; i < numArgs; ++i) {
      const Argument &a = argument(e, i);
      offsets.push_back(descriptorBytes);
      if (a.kind != "index")
        descriptorBytes += rt::descriptorBytes(a.shape.size());
    }
    frame.descriptors = LLVM::AllocaOp::create(
        fb, loc, ptr,
        LLVM::LLVMArrayType::get(i8, std::max<int64_t>(descriptorBytes, 8)),
        one, 8);
    int64_t v = 0;
    for (int64_t i = 0; i < numArgs; ++i) {
      const Argument &a = argument(e, i);
      if (a.kind == "index")
        frame.operands.push_back(params[v]);
      else
        frame.operands.push_back(
            LLVM::GEPOp::create(fb, loc, ptr, i8, frame.descriptors,
                                ArrayRef<LLVM::GEPArg>{int32_t(offsets[i])}));
      v += 1 + int64_t(a.sizeParams().size());
    }
    return frame;
  }

  static const Argument &argument(const EntryPoint &e, int64_t i) {
    const int64_t numInputs = int64_t(e.arguments.size());
    return i < numInputs ? e.arguments[i] : e.results[i - numInputs];
  }

  LLVM::LLVMFuncOp lowered(StringRef name, size_t numOperands) {
    auto f =
        module.lookupSymbol<LLVM::LLVMFuncOp>(("_mlir_ciface_" + name).str());
    if (!f || f.getNumArguments() != numOperands)
      return nullptr;
    return f;
  }

  llvm::Error build(const EntryPoint &e) {
    auto table = entryTable(e);
    if (!table)
      return table.takeError();
    const size_t numOperands = e.arguments.size() + e.results.size();
    LLVM::LLVMFuncOp callee = lowered(e.function, numOperands);
    LLVM::LLVMFuncOp check = lowered("__pisa_check_" + e.function, numOperands);
    LLVM::LLVMFuncOp workspace =
        lowered("__pisa_workspace_" + e.function, numOperands);
    const bool fixedWorkspace = e.workspaceBytes != rt::kDynamicSize;
    if (!callee || (!e.rules.empty() && !check) ||
        (!fixedWorkspace && !workspace))
      return invalidInput("entry point @" + e.function +
                          ": the lowered function has an unexpected signature");

    auto tableType = LLVM::LLVMArrayType::get(i64, table->size());
    LLVM::GlobalOp::create(
        b, loc, tableType, /*isConstant=*/true, LLVM::Linkage::Internal,
        "__pisa_table_" + e.function,
        DenseIntElementsAttr::get(
            RankedTensorType::get({int64_t(table->size())}, i64), *table));

    LLVM::LLVMFuncOp describe =
        declare("pisaCallDescribe", i32, {ptr, ptr, ptr, ptr, ptr});
    LLVM::LLVMFuncOp sizes = declare("pisaCallSizes", i32, {ptr, ptr, ptr});
    LLVM::LLVMFuncOp refuse =
        declare("pisaCallRefuse", i32, {ptr, ptr, ptr, i64});
    LLVM::LLVMFuncOp begin = declare("pisaCallBegin", i32, {ptr, ptr, i64});
    LLVM::LLVMFuncOp end = declare("pisaCallEnd", i32, {});

    // size_t pisa_F_workspace_size(the inputs' dynamic sizes)
    {
      SmallVector<Type> params;
      for (const Argument &a : e.arguments)
        params.append(a.sizeParams().size(), i64);
      auto f =
          LLVM::LLVMFuncOp::create(b, loc, e.symbol + "_workspace_size",
                                   LLVM::LLVMFunctionType::get(i64, params));
      Block *body = f.addEntryBlock(b);
      OpBuilder fb(body, body->begin());
      if (fixedWorkspace) {
        LLVM::ReturnOp::create(fb, loc, constant(fb, i64, e.workspaceBytes));
      } else {
        // The call's parameters with null tensors, zero index arguments
        // and result sizes: the workspace does not depend on them.
        SmallVector<Value> values;
        unsigned next = 0;
        Value zero = constant(fb, i64, 0);
        for (int64_t i = 0; i < int64_t(numOperands); ++i) {
          const Argument &a = argument(e, i);
          values.push_back(zero);
          for (size_t s = 0; s < a.sizeParams().size(); ++s)
            values.push_back(i < int64_t(e.arguments.size())
                                 ? Value(body->getArgument(next++))
                                 : zero);
        }
        CallFrame fr = frame(fb, e, values);
        Value tableAddr = LLVM::AddressOfOp::create(
            fb, loc, ptr, "__pisa_table_" + e.function);
        Value bad = LLVM::CallOp::create(
                        fb, loc, sizes,
                        ValueRange{tableAddr, fr.values, fr.descriptors})
                        .getResult();
        Value bytes =
            LLVM::CallOp::create(fb, loc, workspace, fr.operands).getResult();
        // Negative sizes: SIZE_MAX, which no workspace satisfies.
        Value isBad = LLVM::ICmpOp::create(fb, loc, LLVM::ICmpPredicate::ne,
                                           bad, constant(fb, i32, 0));
        LLVM::ReturnOp::create(fb, loc,
                               LLVM::SelectOp::create(fb, loc, isBad,
                                                      constant(fb, i64, -1),
                                                      bytes));
      }
    }

    LLVM::LLVMFuncOp validate =
        declare("pisaCallValidate", i32, {ptr, ptr, ptr});
    buildCall(e, e.symbol, callee, check, workspace, describe, refuse, begin,
              end, nullptr);
    if (e.validates())
      buildCall(e, e.symbol + "_validate", callee, check, workspace, describe,
                refuse, begin, end, validate);
    return llvm::Error::success();
  }

  /// int pisa_F(call, args (each followed by its sizes)..., result, sizes):
  /// the checks, then the lowered function; with `validate`, the checks,
  /// then `validate` on the descriptors instead of the lowered function.
  void buildCall(const EntryPoint &e, StringRef symbol, LLVM::LLVMFuncOp callee,
                 LLVM::LLVMFuncOp check, LLVM::LLVMFuncOp workspace,
                 LLVM::LLVMFuncOp describe, LLVM::LLVMFuncOp refuse,
                 LLVM::LLVMFuncOp begin, LLVM::LLVMFuncOp end,
                 LLVM::LLVMFuncOp validate) {
    const bool fixedWorkspace = e.workspaceBytes != rt::kDynamicSize;
    SmallVector<Type> params = {ptr};
    for (const Argument &a : e.arguments)
      appendParams(a, params);
    for (const Argument &r : e.results)
      appendParams(r, params);
    auto f = LLVM::LLVMFuncOp::create(b, loc, symbol,
                                      LLVM::LLVMFunctionType::get(i32, params));
    Block *entry = f.addEntryBlock(b);
    Block *checked = new Block(), *run = new Block(), *done = new Block();
    f.getBody().push_back(checked);
    f.getBody().push_back(run);
    f.getBody().push_back(done);
    done->addArgument(i32, loc);
    OpBuilder fb(entry, entry->begin());
    Value call = f.getArgument(0);
    CallFrame fr = frame(fb, e, f.getArguments().drop_front());
    Value tableAddr =
        LLVM::AddressOfOp::create(fb, loc, ptr, "__pisa_table_" + e.function);
    Value nameAddr =
        module.lookupSymbol("__pisa_name_" + e.function)
            ? Value(LLVM::AddressOfOp::create(fb, loc, ptr,
                                              "__pisa_name_" + e.function))
            : global(fb, "__pisa_name_" + e.function, e.function + '\0');
    Value zero32 = constant(fb, i32, 0);
    auto orDone = [&](OpBuilder &ob, Value status, Block *next) {
      Value ok = LLVM::ICmpOp::create(ob, loc, LLVM::ICmpPredicate::eq, status,
                                      zero32);
      LLVM::CondBrOp::create(ob, loc, ok, next, ValueRange{}, done,
                             ValueRange{status});
    };
    // 1. Pointers, index ranges, sizes; the descriptors.
    orDone(fb,
           LLVM::CallOp::create(
               fb, loc, describe,
               ValueRange{tableAddr, nameAddr, call, fr.values, fr.descriptors})
               .getResult(),
           checked);
    // 2. The program's rules on sizes; 3. the workspace and context.
    OpBuilder cb(checked, checked->begin());
    Block *ready = new Block();
    f.getBody().getBlocks().insert(run->getIterator(), ready);
    if (e.rules.empty()) {
      LLVM::BrOp::create(cb, loc, ValueRange{}, ready);
    } else {
      std::string text;
      for (const std::string &rule : e.rules)
        text += rule + '\0';
      text += '\0';
      Value rules = module.lookupSymbol("__pisa_rules_" + e.function)
                        ? Value(LLVM::AddressOfOp::create(
                              cb, loc, ptr, "__pisa_rules_" + e.function))
                        : global(cb, "__pisa_rules_" + e.function, text);
      Value failed =
          LLVM::CallOp::create(cb, loc, check, fr.operands).getResult();
      Block *refused = new Block();
      f.getBody().getBlocks().insert(run->getIterator(), refused);
      Value holds = LLVM::ICmpOp::create(cb, loc, LLVM::ICmpPredicate::eq,
                                         failed, constant(cb, i64, 0));
      LLVM::CondBrOp::create(cb, loc, holds, ready, ValueRange{}, refused,
                             ValueRange{});
      OpBuilder xb(refused, refused->begin());
      Value status =
          LLVM::CallOp::create(xb, loc, refuse,
                               ValueRange{nameAddr, call, rules, failed})
              .getResult();
      LLVM::BrOp::create(xb, loc, ValueRange{status}, done);
    }
    OpBuilder wb(ready, ready->begin());
    Value bytes =
        fixedWorkspace
            ? constant(wb, i64, e.workspaceBytes)
            : LLVM::CallOp::create(wb, loc, workspace, fr.operands).getResult();
    orDone(
        wb,
        LLVM::CallOp::create(wb, loc, begin, ValueRange{nameAddr, call, bytes})
            .getResult(),
        run);

    OpBuilder rb(run, run->begin());
    if (validate) {
      // A failed check ends the call itself (its message recorded).
      Block *valid = new Block();
      f.getBody().getBlocks().insert(done->getIterator(), valid);
      orDone(
          rb,
          LLVM::CallOp::create(rb, loc, validate,
                               ValueRange{tableAddr, nameAddr, fr.descriptors})
              .getResult(),
          valid);
      rb.setInsertionPointToStart(valid);
    } else {
      LLVM::CallOp::create(rb, loc, callee, fr.operands);
    }
    Value ended = LLVM::CallOp::create(rb, loc, end, ValueRange{}).getResult();
    LLVM::BrOp::create(rb, loc, ValueRange{ended}, done);

    OpBuilder db(done, done->begin());
    LLVM::ReturnOp::create(db, loc, done->getArgument(0));
  }
};
} // namespace

llvm::Error pisatool::emitEntryWrappers(ModuleOp module,
                                        const Manifest &manifest) {
  WrapperBuilder builder(module);
  for (const EntryPoint &e : manifest.entryPoints)
    if (llvm::Error err = builder.build(e))
      return err;
  return llvm::Error::success();
}
