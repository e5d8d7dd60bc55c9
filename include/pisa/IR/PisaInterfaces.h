//===- PisaInterfaces.h - How a pisa op becomes kernels ---------*- C++ -*-===//

#ifndef PISA_IR_PISAINTERFACES_H
#define PISA_IR_PISAINTERFACES_H

#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace mlir::pisa {

/// What an AOT entry point says of the values a program's ops read and
/// return: pisa-compile maps each fact about a function argument or the
/// returned value into the library's manifest, its header and
/// pisa_F_validate (docs/gpu.md).
struct EntryFacts {
  /// A value whose contents a call's validation checks: `role` names the
  /// rule ("cu_seqlens_q", "cu_seqlens_k", "seq_lens", "from", "to",
  /// "block_table"), `rowsOf` the tensor whose rows it describes (null:
  /// none) and `capacity` the bound it is checked against (0: none).
  struct Role {
    Value value;
    StringRef role;
    Value rowsOf;
    int64_t capacity = 0;
  };
  /// The values an index operand may take (a query offset of static
  /// shapes: 0 <= offset <= N - Nq).
  struct Range {
    Value value;
    int64_t lowest, highest;
  };
  SmallVector<Role> roles;
  SmallVector<Range> ranges;
  /// Tensors the op writes in place (a pyramid cache).
  SmallVector<Value> updatedInPlace;
  /// The index layout of a selection the op returns: "bhtk" ([B, Hkv, Nq,
  /// K]) or "bthk" ([B, Nq, Hkv, K]).
  SmallVector<std::pair<Value, StringRef>> layouts;
};

} // namespace mlir::pisa

#include "pisa/IR/PisaInterfaces.h.inc"

#endif // PISA_IR_PISAINTERFACES_H
