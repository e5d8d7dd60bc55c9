//===- Inputs.h - checks shared by pisa-run's commands ----------*- C++ -*-===//

#ifndef PISA_TOOLS_PISARUN_INPUTS_H
#define PISA_TOOLS_PISARUN_INPUTS_H

#include "Npy.h"
#include "Program.h"

#include "llvm/Support/Error.h"

#include <optional>

namespace pisatool {

/// The first non-finite element of a float array, if any.
std::optional<int64_t> firstNonFinite(const npy::Array &a);

/// C, g, K and the scale within the contract's bounds (one line each).
llvm::Error checkParams(const SelectConfig &cfg);

} // namespace pisatool

#endif // PISA_TOOLS_PISARUN_INPUTS_H
