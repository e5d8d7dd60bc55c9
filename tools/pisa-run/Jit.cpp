//===- Jit.cpp - pisa-cpu-pipeline and the ExecutionEngine ----------------===//

#include "Jit.h"

#include "pisa/InitAllDialects.h"
#include "pisa/Pipelines/Pipelines.h"
#include "pisa/Support/Errors.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <array>
#include <cstdlib>
#include <optional>

using namespace mlir;
using mlir::pisa::invalidInput;

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

pisatool::CompiledProgram::CompiledProgram(
    std::unique_ptr<ExecutionEngine> engine)
    : engine(std::move(engine)) {}
pisatool::CompiledProgram::CompiledProgram(
    std::unique_ptr<llvm::orc::LLJIT> cached)
    : jit(std::move(cached)) {}
pisatool::CompiledProgram::~CompiledProgram() = default;

llvm::Error
pisatool::CompiledProgram::invokePacked(llvm::StringRef adapter,
                                        llvm::MutableArrayRef<void *> args) {
  if (engine)
    return engine->invokePacked(adapter, args);
  // ExecutionEngine's packed wrapper of `adapter` ("_mlir_" + its name).
  auto found = jit->lookup(("_mlir_" + adapter).str());
  if (!found)
    return found.takeError();
  found->toPtr<void (*)(void **)>()(args.data());
  return llvm::Error::success();
}

std::string pisatool::defaultCacheDir() {
  if (const char *dir = std::getenv("PISA_CACHE_DIR"))
    return dir;
  llvm::SmallString<256> path;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    path = xdg;
  else if (const char *home = std::getenv("HOME"); home && *home)
    llvm::sys::path::append(path, home, ".cache");
  else
    return "";
  llvm::sys::path::append(path, "pisa");
  return std::string(path);
}

/// The cache entry of `program` (the text of the lowered module) on this
/// CPU with this LLVM.
static std::string cachePath(llvm::StringRef cacheDir,
                             llvm::StringRef program) {
  llvm::SHA256 hash;
  // Bump the tag when what is compiled from the same program changes.
  hash.update("pisa-run object v2;" LLVM_VERSION_STRING ";");
  hash.update(llvm::sys::getHostCPUName());
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    if (feature.second)
      hash.update(feature.first());
  hash.update(program);
  std::string hex = llvm::toHex(hash.final(), /*LowerCase=*/true);
  llvm::SmallString<256> path(cacheDir);
  llvm::sys::path::append(path, "run-" + hex + ".o");
  return std::string(path);
}

/// Runs memrefCopy of the C runner utilities for programs that call it.
static llvm::orc::SymbolMap
runnerSymbols(llvm::orc::MangleAndInterner interner) {
  llvm::orc::SymbolMap map;
  map[interner("memrefCopy")] = {llvm::orc::ExecutorAddr::fromPtr(&memrefCopy),
                                 llvm::JITSymbolFlags::Exported};
  return map;
}

/// A cache entry is kEntryMagic, the SHA-256 of the object, then the
/// object: a flipped bit anywhere is found before anything is loaded.
static constexpr llvm::StringLiteral kEntryMagic = "PISAJIT2";
static constexpr size_t kEntryHeader = 8 + 32;

/// The object inside the entry `bytes`, or std::nullopt if the entry is
/// not one or its checksum does not match.
static std::optional<llvm::StringRef> checkedObject(llvm::StringRef bytes) {
  if (bytes.size() <= kEntryHeader || !bytes.starts_with(kEntryMagic))
    return std::nullopt;
  llvm::StringRef object = bytes.drop_front(kEntryHeader);
  std::array<uint8_t, 32> sum = llvm::SHA256::hash(
      llvm::ArrayRef<uint8_t>(object.bytes_begin(), object.bytes_end()));
  if (bytes.substr(8, 32) !=
      llvm::StringRef(reinterpret_cast<const char *>(sum.data()), sum.size()))
    return std::nullopt;
  return object;
}

/// The cached object at `path` with `adapter` resolved, or null (absent or
/// unusable: the caller compiles). A corrupt entry is reported as a
/// warning and treated as absent (the compile replaces it).
static std::unique_ptr<llvm::orc::LLJIT> loadCached(const std::string &path,
                                                    llvm::StringRef adapter) {
  llvm::sys::fs::file_status st;
  if (llvm::sys::fs::status(path, st) ||
      st.type() != llvm::sys::fs::file_type::regular_file)
    return nullptr;
  auto entry = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
  if (!entry)
    return nullptr;
  std::optional<llvm::StringRef> object = checkedObject((*entry)->getBuffer());
  if (!object) {
    llvm::errs() << "pisa-run: warning: cache entry '" << path
                 << "' is corrupt (checksum mismatch); compiling again\n";
    return nullptr;
  }
  std::unique_ptr<llvm::MemoryBuffer> buffer =
      llvm::MemoryBuffer::getMemBufferCopy(*object, path);
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) {
    llvm::consumeError(jit.takeError());
    return nullptr;
  }
  llvm::orc::JITDylib &main = (*jit)->getMainJITDylib();
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  llvm::orc::MangleAndInterner interner((*jit)->getExecutionSession(),
                                        (*jit)->getDataLayout());
  if (!process ||
      main.define(llvm::orc::absoluteSymbols(runnerSymbols(interner)))) {
    if (!process)
      llvm::consumeError(process.takeError());
    return nullptr;
  }
  main.addGenerator(std::move(*process));
  if (llvm::Error e = (*jit)->addObjectFile(std::move(buffer))) {
    llvm::consumeError(std::move(e));
    return nullptr;
  }
  // Links the object now: a broken entry fails here, not in the call.
  auto found = (*jit)->lookup(("_mlir_" + adapter).str());
  if (!found) {
    llvm::consumeError(found.takeError());
    return nullptr;
  }
  if (llvm::Error e = (*jit)->initialize(main)) {
    llvm::consumeError(std::move(e));
    return nullptr;
  }
  return std::move(*jit);
}

/// Writes the engine's object to `path` (best effort: a cache that cannot
/// be written is no error), through a temporary file so that no reader
/// sees half an entry.
static void storeCached(ExecutionEngine &engine, const std::string &path) {
  if (llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path)))
    return;
  llvm::SmallString<256> temp;
  int fd;
  if (llvm::sys::fs::createUniqueFile(path + ".%%%%%%.tmp", fd, temp))
    return;
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  engine.dumpToObjectFile(temp);
  // Prefix the object with the magic and its checksum.
  auto object = llvm::MemoryBuffer::getFile(temp, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  bool written = false;
  if (object && (*object)->getBufferSize() > 0) {
    llvm::StringRef bytes = (*object)->getBuffer();
    std::array<uint8_t, 32> sum = llvm::SHA256::hash(
        llvm::ArrayRef<uint8_t>(bytes.bytes_begin(), bytes.bytes_end()));
    std::string entry = kEntryMagic.str();
    entry.append(reinterpret_cast<const char *>(sum.data()), sum.size());
    entry += bytes;
    object->reset();
    std::error_code ec;
    llvm::raw_fd_ostream os(temp, ec);
    if (!ec) {
      os << entry;
      os.close();
      written = !os.has_error();
      if (!written)
        os.clear_error();
    }
  }
  if (!written || llvm::sys::fs::rename(temp, path))
    llvm::sys::fs::remove(temp);
}

llvm::Expected<std::unique_ptr<pisatool::CompiledProgram>>
pisatool::compileForHost(ModuleOp module, llvm::StringRef entry,
                         const std::string &diagnostic, bool dumpIR,
                         llvm::StringRef cacheDir) {
  if (failed(verify(module)))
    return invalidInput("internal error: generated IR does not verify: " +
                        diagnostic);
  if (dumpIR)
    module.print(llvm::outs());
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  MLIRContext &ctx = *module.getContext();
  PassManager pm(&ctx);
  mlir::pisa::buildPisaCPUPipeline(pm);
  if (failed(pm.run(module)))
    return invalidInput("lowering failed: " + diagnostic);
  // The key is the lowered program: a change of pisa's lowering is a new
  // entry, never a stale one.
  const std::string adapter = ("_mlir_ciface_" + entry).str();
  std::string cached;
  if (!cacheDir.empty()) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module.print(os);
    cached = cachePath(cacheDir, text);
    if (auto jit = loadCached(cached, adapter))
      return std::make_unique<CompiledProgram>(std::move(jit));
  }

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
  auto buildLLVMModule = [machine, &optError](Operation *op,
                                              llvm::LLVMContext &llvmCtx) {
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
  engineOptions.enableObjectDump = !cached.empty();
  auto engine =
      ExecutionEngine::create(module, engineOptions, std::move(*hostMachine));
  if (!engine)
    return engine.takeError();
  if (!optError.empty())
    return invalidInput("LLVM optimisation failed: " + optError);
  // Strided memref.copy lowers to a call of the C runner utilities.
  (*engine)->registerSymbols(runnerSymbols);
  // The JIT compiles on first lookup: do it here so that the run time
  // measures the program alone.
  if (auto found = (*engine)->lookupPacked(adapter); !found)
    return found.takeError();
  if (!cached.empty())
    storeCached(**engine, cached);
  return std::make_unique<CompiledProgram>(std::move(*engine));
}
