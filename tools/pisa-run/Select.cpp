//===- Select.cpp - pisa-run select: JIT-run PISA selection ---------------===//
//
// Builds `pyramid_build` + `hier_topk` for the shapes of the inputs, lowers
// it with pisa-cpu-pipeline, JIT-compiles it with the ExecutionEngine and
// runs it. Every input problem is found before anything is compiled or
// written, and reported as one line with exit code 2.
//
//===----------------------------------------------------------------------===//

#include "Npy.h"
#include "Options.h"

#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/IR/PisaOps.h"
#include "pisa/InitAllDialects.h"
#include "pisa/Pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

using namespace mlir;
using namespace pisatool;
namespace npy = pisatool::npy;

namespace {

struct SelectConfig {
  int64_t blockSize, topK, branching, queryOffset;
  float scale;
  bool dumpIR;
  bool staticShapes;
  std::string outPath;
};

/// Shapes of a validated problem.
struct Problem {
  int64_t batch, queryHeads, kvHeads, numQueries, numKeys, headDim;
};

/// The first non-finite element, if any.
std::optional<int64_t> firstNonFinite(const npy::Array &a) {
  int64_t n = a.numElements();
  if (a.dtype == npy::DType::F16) {
    const uint8_t *p = a.data.data();
    for (int64_t i = 0; i < n; ++i) {
      uint16_t bits = uint16_t(p[2 * i]) | uint16_t(p[2 * i + 1]) << 8;
      if ((bits & 0x7c00) == 0x7c00)
        return i;
    }
    return std::nullopt;
  }
  for (int64_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, a.data.data() + 4 * i, 4);
    if (!std::isfinite(v))
      return i;
  }
  return std::nullopt;
}

llvm::Expected<Problem> validate(const npy::Array &q, const npy::Array &k,
                                 const SelectConfig &cfg) {
  auto error = [](const llvm::Twine &msg) {
    return llvm::createStringError(std::errc::invalid_argument,
                                   msg.str().c_str());
  };
  for (auto [name, a, dims] :
       {std::tuple{"Q", &q, "[B, Hq, N, d]"}, std::tuple{"K", &k, "[B, Hkv, N, d]"}}) {
    if (a->shape.size() != 4)
      return error(llvm::Twine("expected ") + name + " to have rank 4 " + dims +
                   " but got rank " + llvm::Twine(a->shape.size()));
    if (a->dtype == npy::DType::I32)
      return error(llvm::Twine("expected ") + name +
                   " to be float32 or float16 but got int32");
    for (int64_t extent : a->shape)
      if (extent < 1)
        return error(llvm::Twine("expected every dimension of ") + name +
                     " to be >= 1 but got a dimension of 0");
  }
  if (q.dtype != k.dtype)
    return error(llvm::Twine("expected Q and K to have the same dtype but got ") +
                 npy::dtypeName(q.dtype) + " and " + npy::dtypeName(k.dtype));
  Problem p{q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2],
            q.shape[3]};
  if (k.shape[0] != p.batch)
    return error("expected K to have B = " + llvm::Twine(p.batch) +
                 " like Q but got " + llvm::Twine(k.shape[0]));
  if (k.shape[3] != p.headDim)
    return error("expected K to have d = " + llvm::Twine(p.headDim) +
                 " like Q but got " + llvm::Twine(k.shape[3]));
  if (p.queryHeads % p.kvHeads != 0)
    return error("expected Hq (" + llvm::Twine(p.queryHeads) +
                 ") to be a multiple of Hkv (" + llvm::Twine(p.kvHeads) + ")");
  if (cfg.blockSize < 1 || cfg.blockSize > mlir::pisa::kMaxBlockSize)
    return error("expected --block-size C in [1, " +
                 llvm::Twine(mlir::pisa::kMaxBlockSize) + "] but got " +
                 llvm::Twine(cfg.blockSize));
  if (cfg.branching < 2 || cfg.branching > mlir::pisa::kMaxBranching)
    return error("expected --branching g in [2, " +
                 llvm::Twine(mlir::pisa::kMaxBranching) + "] but got " +
                 llvm::Twine(cfg.branching));
  if (cfg.topK < 3 || cfg.topK > mlir::pisa::kMaxTopK)
    return error("expected --topk K in [3, " +
                 llvm::Twine(mlir::pisa::kMaxTopK) +
                 "] (room for the forced blocks) but got " +
                 llvm::Twine(cfg.topK));
  if (cfg.queryOffset < 0)
    return error("expected --query-offset >= 0 but got " +
                 llvm::Twine(cfg.queryOffset));
  if (cfg.queryOffset + p.numQueries > p.numKeys)
    return error("expected query offset (" + llvm::Twine(cfg.queryOffset) +
                 ") + queries in Q (" + llvm::Twine(p.numQueries) +
                 ") <= keys in K (" + llvm::Twine(p.numKeys) + ")");
  if (!(std::isfinite(cfg.scale) && cfg.scale > 0.0f))
    return error("expected a finite positive --scale but got " +
                 std::to_string(cfg.scale));
  for (auto [name, a] : {std::pair{"Q", &q}, std::pair{"K", &k}})
    if (std::optional<int64_t> at = firstNonFinite(*a))
      return error(llvm::Twine("expected finite values in ") + name +
                   " but element " + llvm::Twine(*at) + " is inf or nan");
  return p;
}

/// func.func @select(%q, %k, %offset: index) -> selection, C interface,
/// with B, N and Nq dynamic: the compiled program depends only on
/// (G, Hkv, d, C, K, g, dtype) and runs any length (docs/semantics.md).
OwningOpRef<ModuleOp> buildModule(MLIRContext &ctx, const Problem &p,
                                  const SelectConfig &cfg, Type elemType) {
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
  auto qType = RankedTensorType::get({batch, p.queryHeads, queries, p.headDim},
                                     elemType);
  auto kType =
      RankedTensorType::get({batch, p.kvHeads, keys, p.headDim}, elemType);
  auto pyrType = RankedTensorType::get({batch, p.kvHeads, rows, p.headDim},
                                       b.getF32Type());
  auto selType = RankedTensorType::get({batch, p.kvHeads, queries, cfg.topK},
                                       b.getI32Type());

  auto func = func::FuncOp::create(
      b, loc, "select",
      b.getFunctionType({qType, kType, b.getIndexType()}, {selType}));
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  Value pyramid = mlir::pisa::PyramidBuildOp::create(
      b, loc, pyrType, entry->getArgument(1), cfg.blockSize, cfg.branching);
  auto select = mlir::pisa::HierTopKOp::create(
      b, loc, selType, entry->getArgument(0), entry->getArgument(1), pyramid,
      entry->getArgument(2), cfg.topK, cfg.blockSize, cfg.branching,
      b.getF32FloatAttr(cfg.scale), /*schedule=*/nullptr);
  func::ReturnOp::create(b, loc, select.getResult());
  return module;
}

template <typename T>
StridedMemRefType<T, 4> describe(const npy::Array &a) {
  StridedMemRefType<T, 4> desc;
  desc.basePtr = desc.data =
      reinterpret_cast<T *>(const_cast<uint8_t *>(a.data.data()));
  desc.offset = 0;
  int64_t stride = 1;
  for (int i = 3; i >= 0; --i) {
    desc.sizes[i] = a.shape[i];
    desc.strides[i] = stride;
    stride *= a.shape[i];
  }
  return desc;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       start)
      .count();
}

} // namespace

int pisatool::runSelect(const Options &options) {
  SelectConfig cfg;
  auto qPath = options.str("q");
  if (!qPath)
    return fail(qPath.takeError());
  auto kPath = options.str("k");
  if (!kPath)
    return fail(kPath.takeError());
  auto out = options.str("out");
  if (!out)
    return fail(out.takeError());
  cfg.outPath = *out;
  for (auto [name, field, fallback] :
       {std::tuple{"block-size", &cfg.blockSize, std::optional<int64_t>()},
        std::tuple{"topk", &cfg.topK, std::optional<int64_t>()},
        std::tuple{"branching", &cfg.branching, std::optional<int64_t>(2)},
        std::tuple{"query-offset", &cfg.queryOffset,
                   std::optional<int64_t>(0)}}) {
    auto value = options.integer(name, fallback);
    if (!value)
      return fail(value.takeError());
    *field = *value;
  }
  cfg.dumpIR = options.has("dump-ir");
  cfg.staticShapes = options.has("static-shapes");

  auto q = npy::read(*qPath);
  if (!q)
    return fail(q.takeError());
  auto k = npy::read(*kPath);
  if (!k)
    return fail(k.takeError());
  auto scale = options.real("scale");
  if (!scale)
    return fail(scale.takeError());
  cfg.scale = *scale ? float(**scale)
                     : (q->shape.size() == 4
                            ? 1.0f / std::sqrt(float(q->shape[3]))
                            : 1.0f);
  auto problem = validate(*q, *k, cfg);
  if (!problem)
    return fail(problem.takeError());

  DialectRegistry registry;
  mlir::pisa::registerAllDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  // Compiler diagnostics become the one-line error of the tool.
  std::string diagnostic;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    if (diagnostic.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
      diagnostic = diag.str();
    return success();
  });

  Type elemType = q->dtype == npy::DType::F16 ? Type(Float16Type::get(&ctx))
                                              : Type(Float32Type::get(&ctx));
  OwningOpRef<ModuleOp> module = buildModule(ctx, *problem, cfg, elemType);
  if (failed(verify(*module)))
    return fail("internal error: generated IR does not verify: " + diagnostic);
  if (cfg.dumpIR)
    module->print(llvm::outs());

  auto compileStart = std::chrono::steady_clock::now();
  PassManager pm(&ctx);
  mlir::pisa::buildPisaCPUPipeline(pm);
  if (failed(pm.run(*module)))
    return fail("lowering failed: " + diagnostic);

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  registerBuiltinDialectTranslation(ctx);
  registerLLVMDialectTranslation(ctx);
  // Optimise for this CPU, with the host triple and data layout set before
  // the optimiser runs: without them its cost model sees no vector
  // registers and leaves the dot products scalar.
  auto hostBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!hostBuilder)
    return fail(hostBuilder.takeError());
  auto hostMachine = hostBuilder->createTargetMachine();
  if (!hostMachine)
    return fail(hostMachine.takeError());
  llvm::TargetMachine *machine = hostMachine->get();
  std::string optError;
  auto buildLLVMModule =
      [machine, &optError](Operation *op, llvm::LLVMContext &llvmCtx) {
        std::unique_ptr<llvm::Module> llvmModule =
            translateModuleToLLVMIR(op, llvmCtx);
        if (!llvmModule)
          return llvmModule;
        llvmModule->setTargetTriple(machine->getTargetTriple());
        llvmModule->setDataLayout(machine->createDataLayout());
        if (llvm::Error err =
                makeOptimizingTransformer(3, 0, machine)(llvmModule.get()))
          optError = llvm::toString(std::move(err));
        return llvmModule;
      };
  ExecutionEngineOptions engineOptions;
  engineOptions.llvmModuleBuilder = buildLLVMModule; // a function_ref
  auto engine =
      ExecutionEngine::create(*module, engineOptions, std::move(*hostMachine));
  if (!engine)
    return fail(engine.takeError());
  if (!optError.empty())
    return fail("LLVM optimisation failed: " + optError);
  // Strided memref.copy lowers to a call of the C runner utilities.
  (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
    map[interner("memrefCopy")] = {llvm::orc::ExecutorAddr::fromPtr(&memrefCopy),
                                   llvm::JITSymbolFlags::Exported};
    return map;
  });
  // The JIT compiles on first lookup: do it here so that the run time
  // measures the selection alone.
  if (auto entry = (*engine)->lookupPacked("_mlir_ciface_select"); !entry)
    return fail(entry.takeError());
  double compileSeconds = secondsSince(compileStart);

  StridedMemRefType<int32_t, 4> result;
  std::memset(&result, 0, sizeof(result));
  auto *resultPtr = &result;
  int64_t offset = cfg.queryOffset;
  auto runStart = std::chrono::steady_clock::now();
  llvm::Error err = llvm::Error::success();
  if (q->dtype == npy::DType::F16) {
    auto qDesc = describe<uint16_t>(*q), kDesc = describe<uint16_t>(*k);
    auto *qPtr = &qDesc, *kPtr = &kDesc;
    err = (*engine)->invoke("select", resultPtr, qPtr, kPtr, offset);
  } else {
    auto qDesc = describe<float>(*q), kDesc = describe<float>(*k);
    auto *qPtr = &qDesc, *kPtr = &kDesc;
    err = (*engine)->invoke("select", resultPtr, qPtr, kPtr, offset);
  }
  if (err)
    return fail(std::move(err));
  double runSeconds = secondsSince(runStart);

  npy::Array selection;
  selection.dtype = npy::DType::I32;
  selection.shape.assign(result.sizes, result.sizes + 4);
  selection.data.resize(selection.numElements() * 4);
  int32_t *dst = reinterpret_cast<int32_t *>(selection.data.data());
  for (int64_t i0 = 0; i0 < result.sizes[0]; ++i0)
    for (int64_t i1 = 0; i1 < result.sizes[1]; ++i1)
      for (int64_t i2 = 0; i2 < result.sizes[2]; ++i2)
        for (int64_t i3 = 0; i3 < result.sizes[3]; ++i3)
          *dst++ = result.data[result.offset + i0 * result.strides[0] +
                               i1 * result.strides[1] +
                               i2 * result.strides[2] +
                               i3 * result.strides[3]];
  // The result buffer is owned by the caller (ownership-based deallocation).
  std::free(result.basePtr);
  if (llvm::Error werr = npy::write(cfg.outPath, selection))
    return fail(std::move(werr));

  mlir::pisa::PyramidLayout layout(problem->numKeys, cfg.blockSize,
                                   cfg.branching);
  llvm::outs() << llvm::format(
      "pisa-run: selected K=%lld of %lld leaf blocks (C=%lld, g=%lld, %lld "
      "levels) for %lld queries x %lld KV heads x B=%lld, G=%lld, d=%lld; "
      "compile %.2f s, run %.3f s; wrote %s\n",
      (long long)cfg.topK, (long long)layout.numLeaves(),
      (long long)cfg.blockSize, (long long)cfg.branching,
      (long long)layout.numLevels(), (long long)problem->numQueries,
      (long long)problem->kvHeads, (long long)problem->batch,
      (long long)(problem->queryHeads / problem->kvHeads),
      (long long)problem->headDim, compileSeconds, runSeconds,
      cfg.outPath.c_str());
  return 0;
}
