//===- Manifest.cpp - Entry points of an AOT library ----------------------===//

#include "Manifest.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace pisatool;
using llvm::StringRef;

static llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(std::errc::invalid_argument, "%s",
                                 message.str().c_str());
}

static std::optional<std::string> dtypeOf(Type type) {
  if (type.isF32())
    return "f32";
  if (type.isF16())
    return "f16";
  if (type.isBF16())
    return "bf16";
  if (type.isInteger(32))
    return "i32";
  return std::nullopt;
}

static llvm::Expected<Argument> describe(Type type, std::string name,
                                         StringRef function) {
  Argument arg;
  arg.name = std::move(name);
  if (type.isIndex()) {
    arg.kind = "index";
    return arg;
  }
  auto tensor = dyn_cast<RankedTensorType>(type);
  std::optional<std::string> dtype =
      tensor ? dtypeOf(tensor.getElementType()) : std::nullopt;
  if (!tensor || !tensor.hasStaticShape() || !dtype)
    return error("entry point @" + function + ": " + arg.name +
                 " must be a statically shaped f32/f16/bf16/i32 tensor or an "
                 "index");
  arg.kind = "memref";
  arg.dtype = *dtype;
  arg.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
  return arg;
}

llvm::Expected<Manifest> pisatool::describeEntryPoints(ModuleOp module) {
  Manifest manifest;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isPrivate() || func.isExternal())
      continue;
    EntryPoint entry;
    entry.function = func.getSymName().str();
    entry.symbol = "_mlir_ciface_" + entry.function;
    FunctionType type = func.getFunctionType();
    for (auto [i, t] : llvm::enumerate(type.getInputs())) {
      auto arg = describe(t, "arg" + std::to_string(i), entry.function);
      if (!arg)
        return arg.takeError();
      entry.arguments.push_back(*arg);
    }
    if (type.getNumResults() != 1)
      return error("entry point @" + entry.function +
                   " must return exactly one tensor");
    auto result = describe(type.getResult(0), "result", entry.function);
    if (!result)
      return result.takeError();
    if (result->kind != "memref")
      return error("entry point @" + entry.function + " must return a tensor");
    entry.result = *result;
    func->setAttr("llvm.emit_c_interface", UnitAttr::get(func.getContext()));
    manifest.entryPoints.push_back(std::move(entry));
  }
  if (manifest.entryPoints.empty())
    return error("no public function to export");
  return manifest;
}

llvm::Error pisatool::linkSharedLibrary(StringRef object, StringRef output) {
  llvm::SmallString<128> objectPath;
  int fd;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
          "pisa-host", "o", fd, objectPath))
    return error("cannot create a temporary file: " + ec.message());
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << object;
  }
  // Only the entry points and the runtime's public functions are exported:
  // a function named like a libc symbol (`select`, `read`) would otherwise
  // be interposed by libc at load time, and two libraries in one process
  // would bind to each other's runtime.
  llvm::SmallString<128> exportsPath;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
          "pisa-exports", "map", fd, exportsPath))
    return error("cannot create a temporary file: " + ec.message());
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << "{ global: _mlir_ciface_*; pisa_runtime_*; local: *; };\n";
  }
  std::string versionScript = ("-Wl,--version-script=" + exportsPath).str();
  std::string tmpOut = (output + ".tmp").str();
  // An installed pisa-compile links the runtime installed beside it
  // (<prefix>/bin/../lib); a build-tree one, the archive it was built with.
  std::string runtime = PISA_RUNTIME_ARCHIVE;
  static int anchor;
  std::string self = llvm::sys::fs::getMainExecutable("pisa-compile", &anchor);
  llvm::SmallString<256> installed(llvm::sys::path::parent_path(
      llvm::sys::path::parent_path(self)));
  llvm::sys::path::append(installed, "lib", "libPisaCudaRuntime.a");
  if (!self.empty() && llvm::sys::fs::exists(installed))
    runtime = installed.str().str();
  std::string stubs = std::string("-L") + PISA_CUDA_STUBS_DIR;
  llvm::SmallVector<StringRef> argv = {
      PISA_HOST_LINKER, "-shared", "-o", tmpOut, objectPath,
      runtime, stubs, "-lcuda", "-Wl,--no-undefined",
      "-Wl,--as-needed", versionScript};
  // The linker's own output goes to a log, so that a failure is still one
  // line: its first line is quoted.
  llvm::SmallString<128> logPath;
  llvm::sys::fs::createTemporaryFile("pisa-link", "log", logPath);
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(logPath),
                                          StringRef(logPath)};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(PISA_HOST_LINKER, argv, std::nullopt,
                                     redirects, 0, 0, &message);
  llvm::sys::fs::remove(objectPath);
  llvm::sys::fs::remove(exportsPath);
  std::string firstLine;
  if (auto log = llvm::MemoryBuffer::getFile(logPath))
    firstLine = (*log)->getBuffer().split('\n').first.str();
  llvm::sys::fs::remove(logPath);
  if (rc != 0) {
    llvm::sys::fs::remove(tmpOut);
    return error("linking '" + output + "' with " + PISA_HOST_LINKER +
                 " failed: " + (firstLine.empty() ? message : firstLine));
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmpOut, output)) {
    llvm::sys::fs::remove(tmpOut);
    return error("cannot write '" + output + "': " + ec.message());
  }
  return llvm::Error::success();
}

static llvm::json::Object toJson(const Argument &arg) {
  llvm::json::Object o{{"name", arg.name}, {"kind", arg.kind}};
  if (arg.kind == "memref") {
    o["dtype"] = arg.dtype;
    o["shape"] = llvm::json::Array(arg.shape);
  }
  return o;
}

llvm::Error pisatool::writeManifest(const Manifest &manifest,
                                    StringRef output) {
  llvm::SmallString<128> stem(output);
  llvm::sys::path::replace_extension(stem, "");
  llvm::json::Array entries;
  std::string header =
      "/* Entry points of " + llvm::sys::path::filename(output).str() +
      ", generated by pisa-compile. Every memref is a descriptor of device\n"
      " * memory (C order, aligned to 16 bytes: kernels load 16-byte chunks);\n"
      " * the result's buffer is allocated by the library\n"
      " * and freed by the caller with pisa_runtime_free(result.allocated).\n"
      " * Errors: pisa_runtime_last_error() (pisa/Runtime/PisaRuntime.h). */\n"
      "#include <stdint.h>\n\n";
  for (const EntryPoint &e : manifest.entryPoints) {
    llvm::json::Array args;
    std::string params;
    for (const Argument &a : e.arguments) {
      args.push_back(toJson(a));
      params += a.kind == "index" ? ", int64_t " + a.name
                                  : ", const PisaMemRef" +
                                        std::to_string(a.shape.size()) +
                                        " *" + a.name;
    }
    entries.push_back(llvm::json::Object{{"function", e.function},
                                         {"symbol", e.symbol},
                                         {"arguments", std::move(args)},
                                         {"result", toJson(e.result)}});
    header += "void " + e.symbol + "(PisaMemRef" +
              std::to_string(e.result.shape.size()) + " *result" + params +
              ");\n";
  }
  std::string types;
  for (int rank = 1; rank <= 4; ++rank) {
    std::string r = std::to_string(rank);
    types += "typedef struct { void *allocated, *aligned; int64_t offset, "
             "sizes[" + r + "], strides[" + r + "]; } PisaMemRef" + r + ";\n";
  }
  header.insert(header.find("\n\n") + 2, types + "\n");

  llvm::json::Object root{{"library", llvm::sys::path::filename(output)},
                          {"abi", "mlir-c-interface-memref"},
                          {"entry_points", std::move(entries)}};
  std::string json;
  llvm::raw_string_ostream os(json);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  for (auto [ext, text] : {std::pair{".json", json}, std::pair{".h", header}}) {
    std::error_code ec;
    std::string path = (stem + ext).str();
    llvm::raw_fd_ostream out(path, ec);
    if (ec)
      return error("cannot write '" + path + "': " + ec.message());
    out << text;
  }
  return llvm::Error::success();
}
