//===- ParserLimits.h - Inputs MLIR's parser cannot take safely -*- C++ -*-===//
//
// MLIR 22's parser sizes a value name's table of results by the largest
// result number it reads: `%x#2147483647` makes it allocate 32 GiB and
// abort before any diagnostic (upstream behaviour, found by pisa's fuzzer).
// pisa-compile and the fuzzer check the text first; no pisa op has more
// than a few results.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_SUPPORT_PARSERLIMITS_H
#define PISA_SUPPORT_PARSERLIMITS_H

#include "llvm/ADT/StringRef.h"

#include <cctype>
#include <cstdint>
#include <optional>

namespace mlir::pisa {

/// The largest result number `%name#N` an input may use.
constexpr uint64_t kMaxResultNumber = 65535;

/// The first use `%name#N` with N above kMaxResultNumber: its offset in
/// `text` and its spelling; std::nullopt if there is none.
inline std::optional<std::pair<size_t, llvm::StringRef>>
findHugeResultNumber(llvm::StringRef text) {
  auto isNameChar = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
           c == '$' || c == '.' || c == '-';
  };
  for (size_t i = text.find('%'); i != llvm::StringRef::npos;
       i = text.find('%', i + 1)) {
    size_t j = i + 1;
    while (j < text.size() && isNameChar(text[j]))
      ++j;
    if (j >= text.size() || text[j] != '#')
      continue;
    size_t k = j + 1;
    while (k < text.size() && std::isdigit(static_cast<unsigned char>(text[k])))
      ++k;
    const size_t digits = k - j - 1;
    uint64_t n = 0;
    if (digits > 5 ||
        (digits > 0 && !text.substr(j + 1, digits).getAsInteger(10, n) &&
         n > kMaxResultNumber))
      return std::make_pair(i, text.slice(i, k));
  }
  return std::nullopt;
}

} // namespace mlir::pisa

#endif // PISA_SUPPORT_PARSERLIMITS_H
