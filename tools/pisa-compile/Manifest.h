//===- Manifest.h - Entry points of an AOT library --------------*- C++ -*-===//

#ifndef PISA_TOOLS_PISACOMPILE_MANIFEST_H
#define PISA_TOOLS_PISACOMPILE_MANIFEST_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pisatool {

struct Argument {
  std::string name;           ///< "arg0", ...
  std::string kind;           ///< "memref" (device pointer) or "index"
  std::string dtype;          ///< f32, f16, bf16, i32 for memrefs
  std::vector<int64_t> shape; ///< ShapedType::kDynamic: given at the call
  /// The C parameters of its dynamic sizes: <name>_dim<r>.
  std::vector<std::string> sizeParams() const;
  /// A result: for each dynamic size, the (argument, dimension) whose size
  /// it is, or (-1, -1) when the program computes it otherwise.
  std::vector<std::pair<int64_t, int64_t>> sizeFrom;
  /// Index arguments: the values a call may pass (a query offset must keep
  /// offset + queries <= keys for every op it feeds).
  int64_t lowest = INT64_MIN, highest = INT64_MAX;
  /// A result that is a selection: "bhtk" ([B, Hkv, Nq, K]) or "bthk"
  /// ([B, Nq, Hkv, K], from a token_major hier_topk); empty otherwise.
  std::string layout;
  /// What pisa_F_validate checks the values of, in the order the program
  /// uses them (one argument may have several: an append's `to` that is
  /// also decode_select's seq_lens): "cu_seqlens_q" / "cu_seqlens_k" of a
  /// varlen op (rowsArg: the argument whose first dimension is the rows it
  /// packs), "seq_lens" of pisa.decode_select (rowsArg: the queries, whose
  /// dimension 2 is Nq; capacity: Ncap), "from" / "to" of
  /// pisa.pyramid_append (capacity: Ncap). rowsArg is -1 when that tensor
  /// is not an argument; the first role that names one sets it.
  std::vector<std::string> roles;
  int64_t rowsArg = -1;
  int64_t capacity = 0;
  /// A pyramid cache that pisa.pyramid_append updates: the call writes it.
  bool updatedInPlace = false;
};

struct EntryPoint {
  std::string function; ///< the program's function
  std::string symbol;   ///< pisa_<function>
  std::vector<Argument> arguments;
  /// What it returns, in order; each becomes an out-parameter after the
  /// arguments ("result" when there is one, else "result0", "result1", ...,
  /// or the name of the function result's `pisa.name` attribute).
  std::vector<Argument> results;
  /// Set by planEntryPoints: the workspace bytes (-1: computed per call from
  /// the sizes) and the rules on sizes checked before a call.
  int64_t workspaceBytes = 0;
  std::vector<std::string> rules;
  /// An attention entry's training entry points (pisa.backward of
  /// --pisa-add-backward-entries): their functions and the arguments the
  /// gradients are of; or why it has none (pisa.no_backward).
  std::string forwardEntry, backwardEntry, noBackward;
  std::vector<int64_t> gradInputs;
  bool tokenMajor = false;
  /// Whether pisa_F_validate is exported: an argument has a role.
  bool validates() const;
};

struct Manifest {
  std::vector<EntryPoint> entryPoints;
};

/// Describes the public functions of `module` and marks them
/// llvm.emit_c_interface. They must take tensors (static or dynamic sizes)
/// or index values and return one or more tensors; index arguments that are
/// query offsets of static shapes get their bounds. The name argument `i` of
/// `func` has in the source ("" if none is known).
using SourceNames =
    llvm::function_ref<std::string(mlir::func::FuncOp func, unsigned i)>;
/// Arguments are named as in the source where that name is a C identifier
/// that no other parameter uses (else argN).
llvm::Expected<Manifest> describeEntryPoints(mlir::ModuleOp module,
                                             SourceNames names);

/// Links host object code with the CUDA runtime into a shared library
/// exporting only the entry points and pisa_runtime_*, and returns its
/// bytes (`output` only names it in messages).
llvm::Expected<std::string> linkSharedLibrary(llvm::StringRef object,
                                              llvm::StringRef output,
                                              const Manifest &manifest);

/// The paths of the manifest written beside `output`: <stem>.json, <stem>.h.
std::vector<std::string> manifestPaths(llvm::StringRef output);
/// Their contents, in the same order.
std::vector<std::string> manifestFiles(const Manifest &manifest,
                                       llvm::StringRef output);

} // namespace pisatool

#endif // PISA_TOOLS_PISACOMPILE_MANIFEST_H
