//===- Manifest.cpp - Entry points of an AOT library ----------------------===//

#include "Manifest.h"

#include <unistd.h>

#include "pisa/IR/PisaInterfaces.h"
#include "pisa/Runtime/EntryTable.h"
#include "pisa/Support/Errors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace pisatool;

/// include/pisa/Runtime/PisaRuntime.h, embedded in every generated header
/// so that it stands alone (its include guard lets both be included).
static const char *const kRuntimeHeader =
#include "RuntimeHeader.inc"
    ;
using llvm::StringRef;
using mlir::pisa::invalidInput;

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

/// What the program's ops say of the entry's arguments and result
/// (KernelLoweringOpInterface::describeEntry): an index argument's range
/// (each op narrows it: a query offset keeps offset + Nq <= N), the roles
/// pisa_F_validate checks (an argument may have several, in the order the
/// program uses them; the first that names the tensor whose rows it
/// describes sets rowsArg), caches updated in place, a selection's layout.
static void applyEntryFacts(func::FuncOp func, EntryPoint &entry) {
  auto argIndex = [&](Value v) -> int64_t {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &func.getBody().front()
               ? int64_t(arg.getArgNumber())
               : -1;
  };
  SmallVector<Value> returned;
  func.walk([&](func::ReturnOp ret) {
    returned.assign(ret.getOperands().begin(), ret.getOperands().end());
  });
  func.walk([&](mlir::pisa::KernelLoweringOpInterface op) {
    mlir::pisa::EntryFacts facts;
    op.describeEntry(facts);
    for (const auto &range : facts.ranges) {
      int64_t i = argIndex(range.value);
      if (i < 0 || entry.arguments[i].kind != "index")
        continue;
      Argument &a = entry.arguments[i];
      a.lowest = std::max(a.lowest, range.lowest);
      a.highest = std::min(a.highest, range.highest);
    }
    for (const auto &role : facts.roles) {
      int64_t i = argIndex(role.value);
      if (i < 0 || llvm::is_contained(entry.arguments[i].roles, role.role))
        continue;
      Argument &a = entry.arguments[i];
      a.roles.push_back(role.role.str());
      if (a.rowsArg < 0 && role.rowsOf)
        a.rowsArg = argIndex(role.rowsOf);
      if (role.capacity)
        a.capacity = role.capacity;
    }
    for (Value cache : facts.updatedInPlace)
      if (int64_t i = argIndex(cache); i >= 0)
        entry.arguments[i].updatedInPlace = true;
    for (const auto &[value, layout] : facts.layouts)
      for (auto [i, r] : llvm::enumerate(returned))
        if (value == r && i < entry.results.size())
          entry.results[i].layout = layout.str();
  });
}

bool EntryPoint::validates() const {
  return llvm::any_of(arguments,
                      [](const Argument &a) { return !a.roles.empty(); });
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
  if (!tensor || !dtype)
    return invalidInput(
        "entry point @" + function + ": " + arg.name +
        " must be a ranked f32/f16/bf16/i32 tensor or an index");
  arg.kind = "memref";
  arg.dtype = *dtype;
  arg.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
  return arg;
}

/// `name` if it can name a C (and TorchScript schema) parameter beside the
/// others of the entry point: an identifier that is no C keyword, no name
/// the ABI uses (call, result, ..._dimN) and not taken; else "argN".
static std::string parameterName(StringRef name, unsigned i,
                                 llvm::StringSet<> &taken) {
  static const llvm::StringSet<> reserved = {
      "auto",      "break",    "case",     "char",   "const",   "continue",
      "default",   "do",       "double",   "else",   "enum",    "extern",
      "float",     "for",      "goto",     "if",     "inline",  "int",
      "long",      "register", "restrict", "return", "short",   "signed",
      "sizeof",    "static",   "struct",   "switch", "typedef", "union",
      "unsigned",  "void",     "volatile", "while",  "bool",    "true",
      "false",     "class",    "new",      "delete", "this",    "template",
      "namespace", "operator", "call",     "result", "self",    "Tensor",
      "SymInt",    "int64_t",  "size_t"};
  std::string fallback = "arg" + std::to_string(i);
  bool ok =
      !name.empty() && name.size() <= 64 &&
      (llvm::isAlpha(name[0]) || name[0] == '_') &&
      llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; }) &&
      !name.starts_with("__") && !reserved.contains(name) &&
      !name.contains("_dim") && !name.starts_with("arg");
  std::string chosen = ok && !taken.contains(name) ? name.str() : fallback;
  taken.insert(chosen);
  return chosen;
}

/// The C parameter of result `i`: its `pisa.name` where that can name one
/// (parameterName's rules, "result" included), else "result" for an
/// entry's only result and "result<i>" for one of several.
static std::string resultName(func::FuncOp func, unsigned i,
                              llvm::StringSet<> &taken) {
  std::string fallback = func.getNumResults() == 1
                             ? std::string("result")
                             : "result" + std::to_string(i);
  auto name = func.getResultAttrOfType<StringAttr>(i, "pisa.name");
  std::string chosen = fallback;
  if (name && name.getValue() != "result" &&
      !name.getValue().starts_with("arg") &&
      parameterName(name.getValue(), 0, taken) == name.getValue())
    return name.getValue().str();
  if (taken.contains(chosen))
    chosen = "result_" + std::to_string(i);
  taken.insert(chosen);
  return chosen;
}

llvm::Expected<Manifest> pisatool::describeEntryPoints(ModuleOp module,
                                                       SourceNames names) {
  Manifest manifest;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isPrivate() || func.isExternal())
      continue;
    EntryPoint entry;
    entry.function = func.getSymName().str();
    entry.symbol = "pisa_" + entry.function;
    if (StringRef(entry.function).starts_with("runtime_"))
      return invalidInput("entry point @" + entry.function +
                          ": names starting with 'runtime_' are reserved (the "
                          "library exports pisa_<name> beside pisa_runtime_*)");
    StringRef name = entry.function;
    if (name.empty() || !(llvm::isAlpha(name[0]) || name[0] == '_') ||
        !llvm::all_of(name,
                      [](char c) { return llvm::isAlnum(c) || c == '_'; })) {
      std::string shown;
      llvm::raw_string_ostream os(shown);
      llvm::printEscapedString(name, os);
      return invalidInput("entry point @\"" + shown +
                          "\": its name must be a C identifier "
                          "([A-Za-z_][A-Za-z0-9_]*): the library exports it as "
                          "pisa_<name>");
    }
    FunctionType type = func.getFunctionType();
    llvm::StringSet<> taken;
    for (auto [i, t] : llvm::enumerate(type.getInputs())) {
      auto arg =
          describe(t, parameterName(names(func, i), i, taken), entry.function);
      if (!arg)
        return arg.takeError();
      entry.arguments.push_back(*arg);
    }
    if (type.getNumResults() == 0)
      return invalidInput("entry point @" + entry.function +
                          " must return at least one tensor");
    for (auto [i, t] : llvm::enumerate(type.getResults())) {
      auto result = describe(t, resultName(func, i, taken), entry.function);
      if (!result)
        return result.takeError();
      if (result->kind != "memref")
        return invalidInput("entry point @" + entry.function + ": " +
                            result->name + " must be a tensor");
      entry.results.push_back(*result);
    }
    if (!func.isExternal())
      applyEntryFacts(func, entry);
    if (auto training = func->getAttrOfType<DictionaryAttr>("pisa.backward")) {
      auto forward = training.getAs<FlatSymbolRefAttr>("forward");
      auto backward = training.getAs<FlatSymbolRefAttr>("backward");
      auto inputs = training.getAs<DenseI64ArrayAttr>("inputs");
      if (forward && backward && inputs) {
        entry.forwardEntry = forward.getValue().str();
        entry.backwardEntry = backward.getValue().str();
        entry.gradInputs.assign(inputs.asArrayRef().begin(),
                                inputs.asArrayRef().end());
        if (auto tokenMajor = training.getAs<BoolAttr>("token_major"))
          entry.tokenMajor = tokenMajor.getValue();
      }
    }
    if (auto why = func->getAttrOfType<StringAttr>("pisa.no_backward"))
      entry.noBackward = why.getValue().str();
    func->setAttr("llvm.emit_c_interface", UnitAttr::get(func.getContext()));
    manifest.entryPoints.push_back(std::move(entry));
  }
  if (manifest.entryPoints.empty())
    return invalidInput("no public function to export");
  // Each entry exports pisa_F, pisa_F_workspace_size and perhaps
  // pisa_F_validate: no two entries may export the same symbol.
  llvm::StringMap<std::string> exporter;
  for (const EntryPoint &e : manifest.entryPoints)
    for (StringRef suffix : {"", "_workspace_size", "_validate"}) {
      std::string symbol = e.symbol + suffix.str();
      auto [it, fresh] = exporter.try_emplace(symbol, e.function);
      if (!fresh)
        return invalidInput(
            "entry points @" + it->second + " and @" + e.function +
            " would both export " + symbol +
            " (an entry F also exports pisa_F_workspace_size and "
            "pisa_F_validate): rename one");
    }
  return manifest;
}

llvm::Expected<std::string>
pisatool::linkSharedLibrary(StringRef object, StringRef output,
                            const Manifest &manifest) {
  llvm::SmallString<128> objectPath;
  int fd;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("pisa-host", "o", fd, objectPath))
    return invalidInput("cannot create a temporary file: " + ec.message());
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
    return invalidInput("cannot create a temporary file: " + ec.message());
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << "{ global: pisa_runtime_*;";
    for (const EntryPoint &e : manifest.entryPoints) {
      os << " " << e.symbol << "; " << e.symbol << "_workspace_size;";
      if (e.validates())
        os << " " << e.symbol << "_validate;";
    }
    os << " local: *; };\n";
  }
  std::string versionScript = ("-Wl,--version-script=" + exportsPath).str();
  // The linker writes a private temporary; the caller puts its bytes in
  // place with the other outputs (pisa/Support/OutputFiles.h).
  llvm::SmallString<128> tmpOut;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("pisa-lib", "so", fd, tmpOut))
    return invalidInput("cannot create a temporary file: " + ec.message());
  ::close(fd);
  // An installed pisa-compile links the runtime installed beside it
  // (<prefix>/bin/../lib); a build-tree one, the archive it was built with.
  std::string runtime = PISA_RUNTIME_ARCHIVE;
  static int anchor;
  std::string self = llvm::sys::fs::getMainExecutable("pisa-compile", &anchor);
  llvm::SmallString<256> installed(
      llvm::sys::path::parent_path(llvm::sys::path::parent_path(self)));
  llvm::sys::path::append(installed, "lib", "libPisaCudaRuntime.a");
  if (!self.empty() && llvm::sys::fs::exists(installed))
    runtime = installed.str().str();
  std::string stubs = std::string("-L") + PISA_CUDA_STUBS_DIR;
  llvm::SmallVector<StringRef> argv = {
      PISA_HOST_LINKER,     "-shared",         "-o",         tmpOut,
      objectPath,           runtime,           stubs,        "-lcuda",
      "-Wl,--no-undefined", "-Wl,--as-needed", versionScript};
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
    return invalidInput(
        "linking '" + output + "' with " + PISA_HOST_LINKER +
        " failed: " + (firstLine.empty() ? message : firstLine));
  }
  auto library = llvm::MemoryBuffer::getFile(tmpOut, /*IsText=*/false,
                                             /*RequiresNullTerminator=*/false);
  llvm::sys::fs::remove(tmpOut);
  if (!library)
    return invalidInput("cannot read the linked library: " +
                        library.getError().message());
  return (*library)->getBuffer().str();
}

std::vector<std::string> Argument::sizeParams() const {
  std::vector<std::string> names;
  for (auto [r, size] : llvm::enumerate(shape))
    if (ShapedType::isDynamic(size))
      names.push_back(name + "_dim" + std::to_string(r));
  return names;
}

static llvm::json::Object toJson(const Argument &arg, bool isResult) {
  llvm::json::Object o{{"name", arg.name}, {"kind", arg.kind}};
  if (arg.kind == "memref") {
    o["dtype"] = arg.dtype;
    llvm::json::Array shape;
    for (int64_t size : arg.shape)
      shape.push_back(ShapedType::isDynamic(size) ? llvm::json::Value(nullptr)
                                                  : llvm::json::Value(size));
    o["shape"] = std::move(shape);
    o["size_params"] = llvm::json::Array(arg.sizeParams());
    if (arg.updatedInPlace)
      o["updated_in_place"] = true;
    if (!arg.roles.empty()) {
      o["roles"] = llvm::json::Array(arg.roles);
      auto has = [&](StringRef r) { return llvm::is_contained(arg.roles, r); };
      llvm::json::Value refersTo = arg.rowsArg < 0
                                       ? llvm::json::Value(nullptr)
                                       : llvm::json::Value(arg.rowsArg);
      if (has("seq_lens"))
        o["queries"] = refersTo;
      else if (has("block_table"))
        o["pages_of"] = refersTo;
      else if (has("cu_seqlens_q") || has("cu_seqlens_k"))
        o["rows_of"] = refersTo;
      if (arg.capacity)
        o["capacity"] = arg.capacity;
    }
    if (isResult) {
      llvm::json::Array from;
      for (auto [a, d] : arg.sizeFrom)
        from.push_back(a < 0 ? llvm::json::Value(nullptr)
                             : llvm::json::Value(llvm::json::Array{a, d}));
      o["size_from"] = std::move(from);
      if (!arg.layout.empty())
        o["layout"] = arg.layout;
    }
  } else {
    if (arg.lowest != INT64_MIN)
      o["lowest"] = arg.lowest;
    if (arg.highest != INT64_MAX)
      o["highest"] = arg.highest;
  }
  return o;
}

static std::string shapeText(const Argument &a) {
  std::string text = a.dtype + " [";
  for (auto [i, d] : llvm::enumerate(a.shape))
    text += (i ? ", " : "") + (ShapedType::isDynamic(d)
                                   ? a.name + "_dim" + std::to_string(i)
                                   : std::to_string(d));
  return text + "]";
}

/// The declarations of one entry point, with its shapes in a comment.
static std::string declare(const EntryPoint &e) {
  std::string doc = "/* @" + e.function + ": ", params, sizeParams;
  for (auto [i, a] : llvm::enumerate(e.arguments)) {
    doc += i ? ", " : "";
    if (a.kind == "index") {
      doc += a.name + " index";
      if (a.lowest != INT64_MIN || a.highest != INT64_MAX)
        doc += " in [" + std::to_string(a.lowest) + ", " +
               std::to_string(a.highest) + "]";
      params += ", int64_t " + a.name;
    } else {
      doc += a.name + " " + shapeText(a) +
             (a.updatedInPlace ? " (a pyramid cache, updated in place)" : "");
      params += ", const void *" + a.name;
      for (const std::string &size : a.sizeParams()) {
        params += ", int64_t " + size;
        sizeParams += (sizeParams.empty() ? "int64_t " : ", int64_t ") + size;
      }
    }
  }
  std::string resultParams;
  for (const Argument &r : e.results) {
    resultParams += std::string(", ") +
                    (r.dtype == "i32" ? "int32_t" : "void") + " *" + r.name;
    for (const std::string &size : r.sizeParams())
      resultParams += ", int64_t " + size;
    doc += "\n *   " + r.name + " " + shapeText(r) + " (written in place);";
  }
  bool fixed = e.workspaceBytes != ::pisa::runtime::kDynamicSize;
  doc += " " +
         (fixed ? std::to_string(e.workspaceBytes) + " bytes"
                : std::string("_workspace_size(sizes) bytes")) +
         " of workspace. */\n";
  std::string upper = llvm::StringRef(e.function).upper();
  std::string macro = fixed ? "#define PISA_" + upper + "_WORKSPACE_BYTES " +
                                  std::to_string(e.workspaceBytes) + "\n"
                            : "";
  std::string validate =
      e.validates()
          ? "/* The checks of a call, cu_seqlens' values included (read back\n"
            " * after call->stream's earlier work: it synchronises), and no\n"
            " * kernel: PISA_OK when the same call would run. */\nint " +
                e.symbol + "_validate(const PisaCall *call" + params +
                resultParams + ");\n"
          : std::string();
  return doc + macro + "size_t " + e.symbol + "_workspace_size(" +
         (sizeParams.empty() ? "void" : sizeParams) + ");\n" + "int " +
         e.symbol + "(const PisaCall *call" + params + resultParams + ");\n" +
         validate + "\n";
}

std::vector<std::string> pisatool::manifestPaths(StringRef output) {
  llvm::SmallString<128> stem(output);
  llvm::sys::path::replace_extension(stem, "");
  return {(stem + ".json").str(), (stem + ".h").str()};
}

std::vector<std::string> pisatool::manifestFiles(const Manifest &manifest,
                                                 StringRef output) {
  llvm::SmallString<128> stem(llvm::sys::path::filename(output));
  llvm::sys::path::replace_extension(stem, "");
  std::string guard = "PISA_LIB_" + llvm::StringRef(stem).upper() + "_H";
  for (char &c : guard)
    if (!llvm::isAlnum(c))
      c = '_';
  std::string header =
      "/* Entry points of " + llvm::sys::path::filename(output).str() +
      ", generated by pisa-compile. The call contract follows "
      "(PisaRuntime.h):\n"
      " * every tensor is device memory in C order, 16-byte aligned, owned by\n"
      " * the caller; a call returns a PisaStatus and enqueues on "
      "call->stream.\n"
      " * Link with -L<dir> -l<name> (the library needs libcuda). */\n"
      "#ifndef " +
      guard + "\n#define " + guard + "\n\n" + kRuntimeHeader +
      "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  llvm::json::Array entries;
  for (const EntryPoint &e : manifest.entryPoints) {
    llvm::json::Array args;
    llvm::json::Array results;
    for (const Argument &a : e.arguments)
      args.push_back(toJson(a, /*isResult=*/false));
    for (const Argument &r : e.results)
      results.push_back(toJson(r, /*isResult=*/true));
    llvm::json::Object entry{
        {"function", e.function},
        {"symbol", e.symbol},
        {"workspace_symbol", e.symbol + "_workspace_size"},
        {"workspace_bytes", e.workspaceBytes == ::pisa::runtime::kDynamicSize
                                ? llvm::json::Value(nullptr)
                                : llvm::json::Value(e.workspaceBytes)},
        {"rules", llvm::json::Array(e.rules)},
        {"arguments", std::move(args)},
        {"results", std::move(results)}};
    if (e.validates())
      entry["validate_symbol"] = e.symbol + "_validate";
    if (!e.backwardEntry.empty())
      entry["backward"] =
          llvm::json::Object{{"forward", e.forwardEntry},
                             {"backward", e.backwardEntry},
                             {"inputs", llvm::json::Array(e.gradInputs)},
                             {"token_major", e.tokenMajor}};
    if (!e.noBackward.empty())
      entry["no_backward"] = e.noBackward;
    entries.push_back(std::move(entry));
    header += declare(e);
  }
  header += "#ifdef __cplusplus\n}\n#endif\n\n#endif\n";

  llvm::json::Object root{{"library", llvm::sys::path::filename(output)},
                          {"abi", "pisa-call-v3"},
                          {"entry_points", std::move(entries)}};
  std::string json;
  llvm::raw_string_ostream os(json);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  return {json, header};
}
