//===- Jit.h - pisa-cpu-pipeline and the ExecutionEngine --------*- C++ -*-===//
//
// Lowers a pisa program for this CPU and JIT-compiles its entry point, so
// that every pisa-run command compiles the same way.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_TOOLS_PISARUN_JIT_H
#define PISA_TOOLS_PISARUN_JIT_H

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace pisatool {

/// A context with every dialect pisa's programs use, whose first compiler
/// error is kept in `diagnostic` (the tool's one-line message).
class CompileContext {
public:
  CompileContext();
  mlir::MLIRContext &get() { return ctx; }
  std::string diagnostic;

private:
  mlir::MLIRContext ctx;
  mlir::ScopedDiagnosticHandler handler;
};

/// A compiled program: JIT-compiled now, or this CPU's object code from
/// pisa-run's cache. `invoke` is ExecutionEngine::invoke.
class CompiledProgram {
public:
  explicit CompiledProgram(std::unique_ptr<mlir::ExecutionEngine> engine);
  explicit CompiledProgram(std::unique_ptr<llvm::orc::LLJIT> cached);
  ~CompiledProgram();

  template <typename... Args>
  llvm::Error invoke(llvm::StringRef function, Args... args) {
    llvm::SmallVector<void *> packed;
    (mlir::ExecutionEngine::Argument<Args>::pack(packed, args), ...);
    return invokePacked(("_mlir_ciface_" + function).str(), packed);
  }
  llvm::Error invokePacked(llvm::StringRef adapter,
                           llvm::MutableArrayRef<void *> args);
  /// Whether the code came from the cache (no compilation ran).
  bool fromCache() const { return bool(jit); }

private:
  std::unique_ptr<mlir::ExecutionEngine> engine;
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

/// Where pisa-run keeps compiled programs: $PISA_CACHE_DIR, else
/// $XDG_CACHE_HOME/pisa, else ~/.cache/pisa; empty (no cache) when
/// PISA_CACHE_DIR is set to the empty string or no home is known.
std::string defaultCacheDir();

/// Verifies the program pisa-run built (printing it with `dumpIR`), runs
/// pisa-cpu-pipeline on it, JIT-compiles it optimised for this CPU and
/// looks up `_mlir_ciface_<entry>` (so that a later call runs only the
/// program). With `cacheDir`, the object code is kept there, keyed by the
/// lowered program, this CPU and the LLVM version, and a later run of the
/// same program loads it instead of generating code; a missing, unreadable
/// or broken entry is compiled again, never trusted.
/// `diagnostic` holds the first compiler error seen by the caller's
/// diagnostic handler, for the message.
llvm::Expected<std::unique_ptr<CompiledProgram>>
compileForHost(mlir::ModuleOp module, llvm::StringRef entry,
               const std::string &diagnostic, bool dumpIR,
               llvm::StringRef cacheDir = "");

} // namespace pisatool

#endif // PISA_TOOLS_PISARUN_JIT_H
