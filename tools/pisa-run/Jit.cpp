//===- Jit.cpp - pisa-cpu-pipeline and the ExecutionEngine ----------------===//

#include "Jit.h"

#include "pisa/InitAllDialects.h"
#include "pisa/Pipelines/Pipelines.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

using namespace mlir;

static llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(std::errc::invalid_argument,
                                 message.str().c_str());
}

static DialectRegistry pisaRegistry() {
  DialectRegistry registry;
  mlir::pisa::registerAllDialects(registry);
  return registry;
}

pisatool::CompileContext::CompileContext()
    : ctx(pisaRegistry()), handler(&ctx, [this](Diagnostic &diag) {
        if (diagnostic.empty() &&
            diag.getSeverity() == DiagnosticSeverity::Error)
          diagnostic = diag.str();
        return success();
      }) {
  ctx.loadAllAvailableDialects();
}

llvm::Expected<std::unique_ptr<ExecutionEngine>>
pisatool::compileForHost(ModuleOp module, llvm::StringRef entry,
                         const std::string &diagnostic, bool dumpIR) {
  if (failed(verify(module)))
    return error("internal error: generated IR does not verify: " +
                 diagnostic);
  if (dumpIR)
    module.print(llvm::outs());
  MLIRContext &ctx = *module.getContext();
  PassManager pm(&ctx);
  mlir::pisa::buildPisaCPUPipeline(pm);
  if (failed(pm.run(module)))
    return error("lowering failed: " + diagnostic);

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  registerBuiltinDialectTranslation(ctx);
  registerLLVMDialectTranslation(ctx);
  // Optimise for this CPU, with the host triple and data layout set before
  // the optimiser runs: without them its cost model sees no vector
  // registers and leaves the dot products scalar.
  auto hostBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!hostBuilder)
    return hostBuilder.takeError();
  auto hostMachine = hostBuilder->createTargetMachine();
  if (!hostMachine)
    return hostMachine.takeError();
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
      ExecutionEngine::create(module, engineOptions, std::move(*hostMachine));
  if (!engine)
    return engine.takeError();
  if (!optError.empty())
    return error("LLVM optimisation failed: " + optError);
  // Strided memref.copy lowers to a call of the C runner utilities.
  (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
    map[interner("memrefCopy")] = {llvm::orc::ExecutorAddr::fromPtr(&memrefCopy),
                                   llvm::JITSymbolFlags::Exported};
    return map;
  });
  // The JIT compiles on first lookup: do it here so that the run time
  // measures the program alone.
  if (auto found = (*engine)->lookupPacked(("_mlir_ciface_" + entry).str());
      !found)
    return found.takeError();
  return std::move(*engine);
}
