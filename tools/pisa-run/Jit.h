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

/// Verifies the program pisa-run built (printing it with `dumpIR`), runs
/// pisa-cpu-pipeline on it, JIT-compiles it optimised for this CPU and
/// looks up `_mlir_ciface_<entry>` (so that a later call runs only the
/// program). `diagnostic` holds the first compiler error seen by the
/// caller's diagnostic handler, for the message.
llvm::Expected<std::unique_ptr<mlir::ExecutionEngine>>
compileForHost(mlir::ModuleOp module, llvm::StringRef entry,
               const std::string &diagnostic, bool dumpIR);

} // namespace pisatool

#endif // PISA_TOOLS_PISARUN_JIT_H
