//===- Program.h - the programs pisa-run compiles ---------------*- C++ -*-===//
//
// pisa-run select, attend and decode each JIT-compile one func.func built
// here: pyramid_build + hier_topk (+ sparse_attention, or a decode loop over
// pyramid_append), with B, N and Nq dynamic unless --static-shapes.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_TOOLS_PISARUN_PROGRAM_H
#define PISA_TOOLS_PISARUN_PROGRAM_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <string>

namespace pisatool {

struct SelectConfig {
  int64_t blockSize, topK, branching, queryOffset;
  float scale;
  bool dumpIR;
  bool staticShapes;
  /// Where compiled programs are kept (--cache-dir, else defaultCacheDir);
  /// empty with --no-cache.
  std::string cacheDir;
  /// --token-major: Q, K and the selection are [B, T, H, X] (select only).
  bool tokenMajor = false;
  bool attend;         ///< pisa-run attend: selection + sparse attention
  bool decode;         ///< pisa-run decode: token by token over a cache
  std::string outPath; ///< selection (select) or attention output (attend)
  std::string lseOutPath, selectionOutPath; ///< attend's optional outputs
  /// attend --selection-in: attend over this selection instead of PISA's.
  std::string selectionInPath;
  /// attend --grad-out dO.npy: also run pisa.sparse_attention_grad on dO
  /// and write dq, dk and dv (f32) to these paths.
  std::string gradOutPath, dqOutPath, dkOutPath, dvOutPath;
  bool grad() const { return !gradOutPath.empty(); }
};

/// Shapes of a validated problem.
struct Problem {
  int64_t batch, queryHeads, kvHeads, numQueries, numKeys, headDim;
  int64_t valueDim = 0; ///< dv (attend)
};

/// func.func @select(%q, %k, %offset: index) -> results, C interface: the
/// selection (select, decode) or attention's output, LSE and selection
/// (attend), for the problem's head layout, d, C, K, g and dtype. attend
/// takes %v after %k, then the given selection (--selection-in) and dO
/// (--grad-out); with dO it returns output, LSE, dq, dk, dv, then the
/// selection unless it was given.
mlir::OwningOpRef<mlir::ModuleOp> buildModule(mlir::MLIRContext &ctx,
                                              const Problem &p,
                                              const SelectConfig &config,
                                              mlir::Type elementType);

} // namespace pisatool

#endif // PISA_TOOLS_PISARUN_PROGRAM_H
