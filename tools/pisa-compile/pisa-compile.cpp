//===- pisa-compile.cpp - AOT GPU libraries from pisa programs ------------===//
//
//   pisa-compile INPUT.mlir -o libNAME.so [--chip sm_90a] [--features +ptx80]
//       [--q-tile 4] [--emit so|mlir|llvm] [--backward auto|require|none]
//       [--attention-union-queries W] [--grad-dq-from-scores]
//       [--kernel-config OP:FIELD=VALUE ...]
//
// Lowers every public function of INPUT (pisa ops in host functions with
// tensor arguments) with pisa-lower-to-nvvm-pipeline, compiles the host code
// for this CPU architecture, and links it with the cubin and pisa's CUDA
// runtime into a shared library whose only run-time dependencies are
// libcuda and libc. Beside it, NAME.json and NAME.h document the entry
// points: `pisa_<function>(const PisaCall *, args..., result)` on device
// pointers, with caller-owned result and workspace (PisaRuntime.h).
//
// Any failure is one line on stderr, exit code 2, and no output file.
//
//===----------------------------------------------------------------------===//

#include "EntryABI.h"
#include "Manifest.h"

#include "pisa/Analysis/GPUTarget.h"
#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"
#include "pisa/InitAllDialects.h"
#include "pisa/InitAllPasses.h"
#include "pisa/Pipelines/Pipelines.h"
#include "pisa/Support/CommandLine.h"
#include "pisa/Support/InputFiles.h"
#include "pisa/Support/OutputFiles.h"
#include "pisa/Support/ParserLimits.h"
#include "pisa/Transforms/Passes.h"
#include "pisa/Version.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/AsmParser/AsmParserState.h"

#include "llvm/Config/llvm-config.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <cstdlib>
#include <functional>

using namespace mlir;
using llvm::StringRef;

static int fail(const llvm::Twine &message) {
  llvm::errs() << "pisa-compile: error: " << message << "\n";
  return 2;
}

namespace {
constexpr const char *kUsage =
    "usage: pisa-compile INPUT.mlir -o libNAME.so [--chip sm_90a|sm_90]\n"
    "           [--features +ptx80] [--q-tile 4] [--emit so|mlir|llvm]\n"
    "           [--backward auto|require|none] [--attention-union-queries W]\n"
    "           [--grad-dq-from-scores] [--kernel-config OP:FIELD=VALUE]...\n"
    "Lowers every public function of INPUT.mlir to Hopper kernels (sm_90a:\n"
    "with wgmma; sm_90: without) and host\n"
    "code and links an AOT library (only libcuda and libc needed at run\n"
    "time), with libNAME.json (manifest) and libNAME.h (C header) beside\n"
    "it (the output's path without its extension); --emit mlir or llvm\n"
    "writes the output alone. Outputs are written only when the whole run\n"
    "succeeds; one that is the input, a symbolic link or a directory is\n"
    "refused.\n"
    "An entry point returning a pisa.sparse_attention's output also gets\n"
    "F_forward (o, lse, selection) and F_backward (dq, dk, dv) for training\n"
    "(--backward auto: where the GPU backward supports its shapes; require:\n"
    "an error where it does not; none: never).\n"
    "--attention-union-queries W (1-7; 0, the default: off) builds sparse\n"
    "attention on query tiles of W queries wherever that kernel takes the\n"
    "sizes, and the backward's dq pass on tiles of W queries instead of a\n"
    "warp per query (docs/gpu.md, \"Kernel configurations\").\n"
    "--grad-dq-from-scores computes the backward's dq from the dS tiles the\n"
    "key kernel stores (Nq K G C 16-bit values of scratch) where the kernels\n"
    "take the sizes, instead of a dq pass that recomputes them (docs/gpu.md,\n"
    "\"Sparse attention backward\").\n"
    "--kernel-config OP:FIELD=VALUE (repeatable) asks a #pisa.kernel_config\n"
    "field of every kernel-level op of one kind, e.g.\n"
    "sparse_attention:prefetch_ahead=2; an error where that op's kernels\n"
    "cannot follow it (docs/gpu.md, \"Kernel configurations\").\n"
    "Every --name VALUE may also be written --name=VALUE; a path that\n"
    "starts with \"-\" is written ./-path. Each option but --kernel-config\n"
    "is given once.\n"
    "Errors: one line on stderr, exit code 2, no output file.\n";

struct Options {
  std::string input, output, emit = "so", backward = "auto";
  mlir::pisa::PisaGPUPipelineOptions pipeline;
};

/// Parses argv; a usage error (mlir::pisa::usageError) on bad usage.
llvm::Error parseArgs(int argc, char **argv, Options &opts) {
  using mlir::pisa::usageError;
  opts.pipeline.format = "bin";
  // '-' alone is a value (standard output for -o); -o and -h are options.
  mlir::pisa::CommandLine line(argc, argv, 1, {"-o", "-h"});
  auto value = [&](std::string &field, bool repeats = false) -> llvm::Error {
    llvm::Expected<std::string> v = line.value(repeats);
    if (!v)
      return v.takeError();
    field = std::move(*v);
    return llvm::Error::success();
  };
  // The integer of option `name` in [low, high].
  auto integer = [&](StringRef name, int64_t low, int64_t high,
                     int64_t &out) -> llvm::Error {
    std::string v;
    if (llvm::Error err = value(v))
      return err;
    llvm::Expected<int64_t> parsed =
        mlir::pisa::parseInteger(name, v, low, high);
    if (!parsed)
      return parsed.takeError();
    out = *parsed;
    return llvm::Error::success();
  };
  while (line.next()) {
    StringRef arg = line.name();
    if (arg == "--help" || arg == "-h") {
      if (llvm::Error err = line.flag())
        return err;
      llvm::outs() << kUsage;
      exit(0);
    }
    if (arg == "--version") {
      if (llvm::Error err = line.flag())
        return err;
      llvm::outs() << "pisa-compile (pisa " PISA_VERSION_STRING
                      ", LLVM/MLIR " LLVM_VERSION_STRING ")\n";
      exit(0);
    }
    // Each option returns its error (an llvm::Error is never assigned over
    // an unchecked one: LLVM's ABI-breaking checks abort on that).
    auto option = [&]() -> llvm::Error {
      if (arg == "-o")
        return value(opts.output);
      if (arg == "--chip")
        return value(opts.pipeline.chip);
      if (arg == "--features")
        return value(opts.pipeline.features);
      if (arg == "--emit")
        return value(opts.emit);
      if (arg == "--backward")
        return value(opts.backward);
      if (arg == "--q-tile")
        return integer(arg, 1, mlir::pisa::kMaxQueryTile, opts.pipeline.qTile);
      if (arg == "--attention-union-queries")
        return integer(arg, 0, mlir::pisa::kMaxUnionQueries,
                       opts.pipeline.attentionUnionQueries);
      if (arg == "--kernel-config") {
        std::string v;
        if (llvm::Error err = value(v, /*repeats=*/true))
          return err;
        opts.pipeline.kernelConfig.push_back(v);
        return llvm::Error::success();
      }
      if (arg == "--grad-dq-from-scores") {
        if (llvm::Error err = line.flag())
          return err;
        opts.pipeline.gradDqFromScores = true;
        return llvm::Error::success();
      }
      if (arg.starts_with("-"))
        return usageError("unknown option '" + arg + "'");
      if (!opts.input.empty())
        return usageError("unexpected argument '" + arg + "'");
      opts.input = arg.str();
      return llvm::Error::success();
    };
    if (llvm::Error err = option())
      return err;
  }
  if (opts.input.empty() || opts.output.empty())
    return usageError("usage: pisa-compile INPUT.mlir -o libNAME.so "
                      "[--chip sm_90a] [--features +ptx80] [--q-tile 4] "
                      "[--emit so|mlir|llvm]");
  if (auto why = mlir::pisa::unsupportedGPUTarget(opts.pipeline.chip,
                                                  opts.pipeline.format))
    return usageError(*why);
  if (opts.backward != "auto" && opts.backward != "require" &&
      opts.backward != "none")
    return usageError("expected --backward auto, require or none but got '" +
                      opts.backward + "'");
  if (opts.emit != "so" && opts.emit != "mlir" && opts.emit != "llvm")
    return usageError("expected --emit so, mlir or llvm but got '" + opts.emit +
                      "'");
  if (opts.emit == "so" && opts.output == "-")
    return usageError("expected a file for -o with --emit so (a library "
                      "and its manifest beside it) but got '-'");
  return llvm::Error::success();
}

/// Writes `texts` to `paths` as one OutputSet: all or nothing, existing
/// files untouched on failure (pisa/Support/OutputFiles.h).
llvm::Error writeFiles(llvm::ArrayRef<std::string> paths,
                       llvm::ArrayRef<std::string> texts) {
  auto outputs = mlir::pisa::OutputSet::create(paths);
  if (!outputs)
    return outputs.takeError();
  for (size_t i = 0; i < paths.size(); ++i)
    *outputs->os(i) << texts[i];
  return outputs->commit();
}

/// Every file this run writes: the output, and for a library its manifest.
std::vector<std::string> outputPaths(const Options &opts) {
  std::vector<std::string> paths{opts.output};
  if (opts.emit == "so")
    for (std::string &path : pisatool::manifestPaths(opts.output))
      paths.push_back(std::move(path));
  return paths;
}

/// Host object code (PIC) for this machine's architecture.
llvm::Expected<std::string> emitObject(llvm::Module &module) {
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return llvm::createStringError(std::errc::invalid_argument, "%s",
                                   error.c_str());
  llvm::TargetOptions targetOptions;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, "x86-64", "", targetOptions, llvm::Reloc::PIC_));
  module.setTargetTriple(machine->getTargetTriple());
  module.setDataLayout(machine->createDataLayout());
  if (llvm::Error err = makeOptimizingTransformer(2, 0, machine.get())(&module))
    return std::move(err);
  llvm::SmallString<0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager pm;
  if (machine->addPassesToEmitFile(pm, os, nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return llvm::createStringError(std::errc::not_supported,
                                   "cannot emit object code for %s",
                                   triple.str().c_str());
  pm.run(module);
  return std::string(object.str());
}
} // namespace

/// pisa_runtime_manifest(), returning `json` (PisaRuntime.h): the library
/// carries the description of its own entry points.
static void embedManifest(llvm::Module &module, llvm::StringRef json) {
  llvm::LLVMContext &ctx = module.getContext();
  llvm::Constant *text =
      llvm::ConstantDataArray::getString(ctx, json, /*AddNull=*/true);
  auto *global = new llvm::GlobalVariable(
      module, text->getType(), /*isConstant=*/true,
      llvm::GlobalValue::PrivateLinkage, text, "__pisa_manifest");
  auto *fn = llvm::Function::Create(
      llvm::FunctionType::get(llvm::PointerType::getUnqual(ctx), false),
      llvm::GlobalValue::ExternalLinkage, "pisa_runtime_manifest", module);
  llvm::IRBuilder<> builder(llvm::BasicBlock::Create(ctx, "entry", fn));
  builder.CreateRet(global);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  Options opts;
  if (llvm::Error err = parseArgs(argc, argv, opts))
    return fail(llvm::toString(std::move(err)));

  // An output that is the input or another output is refused before any
  // work.
  if (llvm::Error err =
          mlir::pisa::checkOutputs({opts.input}, outputPaths(opts)))
    return fail(llvm::toString(std::move(err)));

  DialectRegistry registry;
  mlir::pisa::registerAllDialects(registry);
  MLIRContext ctx(registry);
  // Kernel-config entries are checked before any work.
  if (mlir::pisa::KernelPreferences asked;
      auto err = mlir::pisa::parseKernelConfigEntries(
          &ctx, opts.pipeline.kernelConfig, asked))
    return fail(*err);
  std::string diagnostic;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    if (diagnostic.empty() && diag.getSeverity() == DiagnosticSeverity::Error) {
      std::string loc;
      llvm::raw_string_ostream os(loc);
      if (auto file = diag.getLocation()->findInstanceOf<FileLineColLoc>())
        os << file.getFilename().getValue() << ":" << file.getLine() << ":"
           << file.getColumn();
      else
        diag.getLocation().print(os);
      diagnostic = loc + ": " + diag.str();
    }
    return success();
  });

  llvm::SourceMgr sourceMgr;
  auto buffer = mlir::pisa::readInputText(opts.input);
  if (!buffer)
    return fail(llvm::toString(buffer.takeError()));
  if (auto unsafe = pisa::findUnsafeInput((*buffer)->getBuffer()))
    return fail(opts.input + ":" + llvm::Twine(unsafe->line) + ":" +
                llvm::Twine(unsafe->column) + ": " + unsafe->reason);
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  // The parser's record of the source keeps the arguments' names (%q),
  // which become the parameter names of the generated header.
  Block parsed;
  AsmParserState asmState;
  ParserConfig parserConfig(&ctx);
  OwningOpRef<ModuleOp> module;
  if (succeeded(
          parseAsmSourceFile(sourceMgr, &parsed, parserConfig, &asmState)))
    module = mlir::detail::constructContainerOpForParserIfNecessary<ModuleOp>(
        &parsed, &ctx, FileLineColLoc::get(&ctx, opts.input, 1, 1));
  if (!module)
    return fail(diagnostic.empty() ? "cannot parse '" + opts.input + "'"
                                   : diagnostic);
  // Training entry points of attention programs, named after their source.
  if (opts.backward != "none") {
    PassManager training(&ctx);
    mlir::pisa::PisaAddBackwardEntriesOptions trainingOptions;
    trainingOptions.require = opts.backward == "require";
    training.addPass(mlir::pisa::createPisaAddBackwardEntries(trainingOptions));
    if (failed(training.run(*module)))
      return fail(diagnostic.empty() ? "adding the backward entry points failed"
                                     : diagnostic);
  }
  llvm::StringMap<func::FuncOp> derivedFrom;
  for (auto func : module->getOps<func::FuncOp>())
    if (auto backward = func->getAttrOfType<DictionaryAttr>("pisa.backward"))
      for (StringRef key : {"forward", "backward"})
        if (auto name = backward.getAs<FlatSymbolRefAttr>(key))
          derivedFrom[name.getValue()] = func;
  std::function<std::string(func::FuncOp, unsigned)> sourceName =
      [&](func::FuncOp func, unsigned i) -> std::string {
    if (auto it = derivedFrom.find(func.getSymName()); it != derivedFrom.end())
      return i < it->second.getNumArguments()
                 ? sourceName(it->second, i)
                 : func.getArgAttrOfType<StringAttr>(i, "pisa.name")
                       .getValue()
                       .str();
    if (func.isExternal())
      return "";
    const AsmParserState::BlockDefinition *def =
        asmState.getBlockDef(&func.getBody().front());
    if (!def || i >= def->arguments.size())
      return "";
    llvm::SMRange range = def->arguments[i].loc;
    return StringRef(range.Start.getPointer(),
                     range.End.getPointer() - range.Start.getPointer())
        .drop_front() // the '%'
        .str();
  };

  // Entry points: the public functions, with C interfaces.
  auto manifest = pisatool::describeEntryPoints(*module, sourceName);
  if (!manifest)
    return fail(llvm::toString(manifest.takeError()));

  // ptxas and libdevice come from the CUDA toolkit; default to the one this
  // tool was configured with when the environment names none.
  if (!getenv("CUDA_ROOT") && !getenv("CUDA_HOME") && !getenv("CUDA_PATH"))
    setenv("CUDA_HOME", PISA_CUDA_TOOLKIT_DIR, /*overwrite=*/0);

  // Host code on device buffers, where results become out-parameters and
  // the workspace is planned; then LLVM and the binary; then the wrappers.
  PassManager host(&ctx), backend(&ctx);
  mlir::pisa::buildPisaGPUHostPipeline(host, opts.pipeline);
  mlir::pisa::buildPisaGPUBackendPipeline(backend, opts.pipeline);
  if (failed(host.run(*module)))
    return fail(diagnostic.empty() ? "lowering failed" : diagnostic);
  if (llvm::Error err = pisatool::planEntryPoints(*module, *manifest))
    return fail(llvm::toString(std::move(err)));
  if (failed(backend.run(*module)))
    return fail(diagnostic.empty() ? "lowering failed" : diagnostic);
  if (llvm::Error err = pisatool::emitEntryWrappers(*module, *manifest))
    return fail(llvm::toString(std::move(err)));
  if (failed(verify(*module)))
    return fail("the generated entry points do not verify: " + diagnostic);
  bool hasBinary = false;
  module->walk([&](gpu::BinaryOp) { hasBinary = true; });
  if (!hasBinary && !manifest->entryPoints.empty())
    return fail("no GPU binary was produced (is ptxas from CUDA on PATH or "
                "in /usr/local/cuda/bin?)" +
                (diagnostic.empty() ? std::string() : ": " + diagnostic));

  if (opts.emit == "mlir") {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    if (llvm::Error err = writeFiles(outputPaths(opts), {text}))
      return fail(llvm::toString(std::move(err)));
    return 0;
  }

  llvm::LLVMContext llvmCtx;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*module, llvmCtx);
  if (!llvmModule)
    return fail("translation to LLVM IR failed: " + diagnostic);
  // The manifest (NAME.json, then NAME.h) and its copy in the library.
  std::vector<std::string> manifestTexts =
      pisatool::manifestFiles(*manifest, opts.output);
  embedManifest(*llvmModule, manifestTexts.front());
  if (opts.emit == "llvm") {
    std::string text;
    llvm::raw_string_ostream os(text);
    llvmModule->print(os, nullptr);
    if (llvm::Error err = writeFiles(outputPaths(opts), {text}))
      return fail(llvm::toString(std::move(err)));
    return 0;
  }

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto object = emitObject(*llvmModule);
  if (!object)
    return fail(llvm::toString(object.takeError()));
  auto library = pisatool::linkSharedLibrary(*object, opts.output, *manifest);
  if (!library)
    return fail(llvm::toString(library.takeError()));
  std::vector<std::string> texts{std::move(*library)};
  for (std::string &text : manifestTexts)
    texts.push_back(std::move(text));
  if (llvm::Error err = writeFiles(outputPaths(opts), texts))
    return fail(llvm::toString(std::move(err)));
  return 0;
}
