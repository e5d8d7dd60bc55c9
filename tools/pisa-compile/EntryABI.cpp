//===- EntryABI.cpp - The C entry points of an AOT library ----------------===//

#include "EntryABI.h"

#include "pisa/Runtime/EntryTable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace pisatool;
namespace rt = pisa::runtime;

static llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(std::errc::invalid_argument, "%s",
                                 message.str().c_str());
}

/// Bytes of a statically shaped memref of whole-byte elements.
static std::optional<int64_t> bufferBytes(MemRefType type) {
  unsigned bits = type.getElementTypeBitWidth();
  if (!type.hasStaticShape() || !type.getLayout().isIdentity() || bits % 8)
    return std::nullopt;
  return type.getNumElements() * (bits / 8);
}

llvm::Error pisatool::planEntryPoints(ModuleOp module, Manifest &manifest) {
  for (EntryPoint &e : manifest.entryPoints) {
    auto func = module.lookupSymbol<func::FuncOp>(e.function);
    if (!func || !func.getBody().hasOneBlock())
      return error("entry point @" + e.function +
                   ": expected one block of host code after bufferization");
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    auto result = ret.getOperand(0).getDefiningOp<gpu::AllocOp>();
    if (!result || result->getBlock() != &body ||
        !result.getAsyncDependencies().empty() ||
        !bufferBytes(result.getType()))
      return error("entry point @" + e.function +
                   ": its result must be a device buffer that its kernels "
                   "write (it returns an input or a value computed on the "
                   "host)");

    // The result becomes the caller's buffer, written in place.
    unsigned index = func.getNumArguments();
    if (failed(func.insertArgument(index, result.getType(), {},
                                   result.getLoc())) ||
        failed(func.eraseResult(0)))
      return error("entry point @" + e.function + ": cannot rewrite its result");
    result.getMemref().replaceAllUsesWith(func.getArgument(index));
    result.erase();
    OpBuilder b(ret);
    func::ReturnOp::create(b, ret.getLoc());
    ret.erase();

    // Everything else it allocates comes from the workspace, in order.
    int64_t bytes = 0;
    WalkResult walk = func.walk([&](gpu::AllocOp alloc) {
      std::optional<int64_t> size = bufferBytes(alloc.getType());
      if (alloc->getParentOp() != func || !size) {
        alloc.emitError("a device buffer inside control flow or of dynamic "
                        "size: the workspace cannot be planned");
        return WalkResult::interrupt();
      }
      bytes += rt::alignWorkspace(*size);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return error("entry point @" + e.function +
                   ": the workspace cannot be planned (a device buffer inside "
                   "control flow or of dynamic size)");
    e.workspaceBytes = bytes;
  }
  return llvm::Error::success();
}

/// The entry table of EntryTable.h.
static llvm::Expected<SmallVector<int64_t>> entryTable(const EntryPoint &e) {
  SmallVector<int64_t> table = {rt::kEntryTableVersion,
                                int64_t(e.arguments.size()) + 1,
                                e.workspaceBytes};
  auto add = [&](const Argument &a, int64_t kind) -> llvm::Error {
    if (int64_t(a.shape.size()) > rt::kMaxRank)
      return error("entry point @" + e.function + ": " + a.name +
                   " has rank above " + std::to_string(rt::kMaxRank));
    table.append({kind, int64_t(a.shape.size()),
                  kind == rt::kIndex ? a.lowest : 0,
                  kind == rt::kIndex ? a.highest : 0});
    for (int64_t r = 0; r < rt::kMaxRank; ++r)
      table.push_back(r < int64_t(a.shape.size()) ? a.shape[r] : 0);
    return llvm::Error::success();
  };
  for (const Argument &a : e.arguments)
    if (llvm::Error err = add(a, a.kind == "index" ? rt::kIndex : rt::kInput))
      return std::move(err);
  if (llvm::Error err = add(e.result, rt::kResult))
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

  llvm::Error build(const EntryPoint &e) {
    auto table = entryTable(e);
    if (!table)
      return table.takeError();
    auto callee =
        module.lookupSymbol<LLVM::LLVMFuncOp>("_mlir_ciface_" + e.function);
    if (!callee || callee.getNumArguments() != e.arguments.size() + 1)
      return error("entry point @" + e.function +
                   ": the lowered function has an unexpected signature");

    // The constant table and the name the runtime's messages use.
    auto tableType = LLVM::LLVMArrayType::get(i64, table->size());
    LLVM::GlobalOp::create(
        b, loc, tableType, /*isConstant=*/true, LLVM::Linkage::Internal,
        "__pisa_table_" + e.function,
        DenseIntElementsAttr::get(
            RankedTensorType::get({int64_t(table->size())}, i64), *table));
    std::string nameText = e.function + '\0';
    auto nameType = LLVM::LLVMArrayType::get(i8, nameText.size());
    LLVM::GlobalOp::create(b, loc, nameType, /*isConstant=*/true,
                           LLVM::Linkage::Internal, "__pisa_name_" + e.function,
                           b.getStringAttr(nameText));

    LLVM::LLVMFuncOp begin = declare(
        "pisaCallBegin", i32, {ptr, ptr, ptr, ptr, ptr});
    LLVM::LLVMFuncOp end = declare("pisaCallEnd", i32, {});

    // size_t pisa_F_workspace_size(void)
    {
      auto f = LLVM::LLVMFuncOp::create(b, loc, e.symbol + "_workspace_size",
                                        LLVM::LLVMFunctionType::get(i64, {}));
      Block *body = f.addEntryBlock(b);
      OpBuilder fb(body, body->begin());
      LLVM::ReturnOp::create(fb, loc, constant(fb, i64, e.workspaceBytes));
    }

    // int pisa_F(call, args..., result)
    SmallVector<Type> params = {ptr};
    for (const Argument &a : e.arguments)
      params.push_back(a.kind == "index" ? i64 : ptr);
    params.push_back(ptr);
    auto f = LLVM::LLVMFuncOp::create(b, loc, e.symbol,
                                      LLVM::LLVMFunctionType::get(i32, params));
    Block *entry = f.addEntryBlock(b);
    Block *run = new Block(), *done = new Block();
    f.getBody().push_back(run);
    f.getBody().push_back(done);
    done->addArgument(i32, loc);
    OpBuilder fb(entry, entry->begin());

    const int64_t numValues = int64_t(e.arguments.size()) + 1;
    int64_t descriptorBytes = 0;
    SmallVector<int64_t> offsets;
    for (int64_t i = 0; i < numValues; ++i) {
      const Argument &a = i < int64_t(e.arguments.size()) ? e.arguments[i]
                                                          : e.result;
      offsets.push_back(descriptorBytes);
      if (a.kind != "index")
        descriptorBytes += rt::descriptorBytes(a.shape.size());
    }
    Value one = constant(fb, i64, 1);
    Value values = LLVM::AllocaOp::create(
        fb, loc, ptr, LLVM::LLVMArrayType::get(ptr, numValues), one, 8);
    Value descriptors = LLVM::AllocaOp::create(
        fb, loc, ptr, LLVM::LLVMArrayType::get(i8, descriptorBytes), one, 8);
    for (int64_t i = 0; i < numValues; ++i) {
      Value v = f.getArgument(i + 1);
      if (v.getType() == i64)
        v = LLVM::IntToPtrOp::create(fb, loc, ptr, v);
      Value slot = LLVM::GEPOp::create(fb, loc, ptr, ptr, values,
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
      LLVM::StoreOp::create(fb, loc, v, slot);
    }
    Value tableAddr = LLVM::AddressOfOp::create(fb, loc, ptr,
                                                "__pisa_table_" + e.function);
    Value nameAddr = LLVM::AddressOfOp::create(fb, loc, ptr,
                                               "__pisa_name_" + e.function);
    Value status =
        LLVM::CallOp::create(fb, loc, begin,
                             ValueRange{tableAddr, nameAddr, f.getArgument(0),
                                        values, descriptors})
            .getResult();
    Value ok = LLVM::ICmpOp::create(fb, loc, LLVM::ICmpPredicate::eq, status,
                                    constant(fb, i32, 0));
    LLVM::CondBrOp::create(fb, loc, ok, run, ValueRange{}, done,
                           ValueRange{status});

    OpBuilder rb(run, run->begin());
    SmallVector<Value> operands;
    for (int64_t i = 0; i < numValues; ++i) {
      Value v = f.getArgument(i + 1);
      if (v.getType() == i64) {
        operands.push_back(v);
        continue;
      }
      operands.push_back(LLVM::GEPOp::create(
          rb, loc, ptr, i8, descriptors,
          ArrayRef<LLVM::GEPArg>{int32_t(offsets[i])}));
    }
    LLVM::CallOp::create(rb, loc, callee, operands);
    Value ended = LLVM::CallOp::create(rb, loc, end, ValueRange{}).getResult();
    LLVM::BrOp::create(rb, loc, ValueRange{ended}, done);

    OpBuilder db(done, done->begin());
    LLVM::ReturnOp::create(db, loc, done->getArgument(0));
    return llvm::Error::success();
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
