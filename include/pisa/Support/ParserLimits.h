//===- ParserLimits.h - Inputs MLIR's parser cannot take safely -*- C++ -*-===//
//
// Text that makes MLIR 22's own parser crash before any diagnostic (upstream
// behaviour, found by pisa's fuzzer):
//  - `%x#2147483647`: the parser sizes a value name's table of results by the
//    largest result number it reads and aborts allocating 32 GiB;
//  - the custom forms of linalg.transpose, linalg.broadcast and linalg.reduce
//    store a null attribute (a segfault) when the list after
//    `permutation =` / `dimensions =` does not parse;
//  - deep nesting (`tuple<tuple<...`, nested regions, parentheses, lists or
//    dictionaries): the parser recurses once per level and overflows the
//    stack after a few thousand levels.
// pisa-opt, pisa-compile, the C API (pisaCheckParseSafety) and the fuzzer
// check the text first; no pisa op has more than a few results, no pisa
// program nests more than a few dozen levels, and a well-formed list passes
// unchanged.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_SUPPORT_PARSERLIMITS_H
#define PISA_SUPPORT_PARSERLIMITS_H

#include "llvm/ADT/StringRef.h"

#include <cctype>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace mlir::pisa {

/// The largest result number `%name#N` an input may use.
constexpr uint64_t kMaxResultNumber = 65535;

/// The first use `%name#N` with N above kMaxResultNumber: its offset in
/// `text` and its spelling; std::nullopt if there is none. The lexer lets
/// white space and `//` comments separate the name from `#N`, so they are
/// skipped too.
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
    const size_t nameEnd = j;
    while (j < text.size()) {
      if (std::isspace(static_cast<unsigned char>(text[j]))) {
        ++j;
      } else if (text.substr(j).starts_with("//")) {
        j = text.find('\n', j);
        if (j == llvm::StringRef::npos)
          j = text.size();
      } else {
        break;
      }
    }
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
      // `%name#N`, or `#N` alone where space or a comment came between.
      return std::make_pair(i, text.slice(j == nameEnd ? i : j, k));
  }
  return std::nullopt;
}

namespace detail {

inline size_t skipSpace(llvm::StringRef text, size_t at) {
  while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at])))
    ++at;
  return at;
}

/// Whether `text` at `at` starts `[` (int (`,` int)*)? `]`, each int a
/// decimal or hexadecimal i64, as DenseI64ArrayAttr's bare form parses.
inline bool isI64List(llvm::StringRef text, size_t at) {
  at = skipSpace(text, at);
  if (at >= text.size() || text[at] != '[')
    return false;
  at = skipSpace(text, at + 1);
  if (at < text.size() && text[at] == ']')
    return true;
  while (true) {
    size_t start = at;
    if (at < text.size() && text[at] == '-')
      ++at;
    size_t digitsFrom = at;
    while (at < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[at]))))
      ++at;
    int64_t value = 0;
    if (at == digitsFrom ||
        !std::isdigit(static_cast<unsigned char>(text[digitsFrom])) ||
        text.slice(start, at).getAsInteger(0, value))
      return false;
    at = skipSpace(text, at);
    if (at < text.size() && text[at] == ']')
      return true;
    if (at >= text.size() || text[at] != ',')
      return false;
    at = skipSpace(text, at + 1);
  }
}

/// The next `keyword` at or after `from` standing as a bare word (not part of
/// a name like `%dimensions` or `dimensions_of`).
inline size_t findBareWord(llvm::StringRef text, llvm::StringRef keyword,
                           size_t from) {
  auto isWordChar = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
           c == '$' || c == '.' || c == '%' || c == '@' || c == '#' ||
           c == '^' || c == '!';
  };
  for (size_t at = text.find(keyword, from); at != llvm::StringRef::npos;
       at = text.find(keyword, at + 1)) {
    size_t end = at + keyword.size();
    if ((at == 0 || !isWordChar(text[at - 1])) &&
        (end >= text.size() || !isWordChar(text[end])))
      return at;
  }
  return llvm::StringRef::npos;
}

} // namespace detail

/// The deepest nesting of (), [], {} and <> an input may have. Programs
/// nest a few dozen levels; the parser's recursion per level is at most a
/// few KiB of stack, so this stays far below an 8 MiB (or a thread's
/// 512 KiB) stack.
constexpr size_t kMaxNestingDepth = 256;

/// The offset of the first bracket that opens a level deeper than
/// kMaxNestingDepth, outside string literals and `//` comments; npos if
/// there is none. `->`, `>=` and `<=` are not brackets.
inline size_t findDeepNesting(llvm::StringRef text) {
  size_t depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') { // a string literal, with backslash escapes
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      i = text.find('\n', i);
      if (i == llvm::StringRef::npos)
        break;
      continue;
    }
    bool pairedWithEq = i + 1 < text.size() && text[i + 1] == '=';
    if (c == '(' || c == '[' || c == '{' || (c == '<' && !pairedWithEq)) {
      if (++depth > kMaxNestingDepth)
        return i;
    } else if (c == ')' || c == ']' || c == '}' ||
               (c == '>' && !pairedWithEq && !(i > 0 && text[i - 1] == '-'))) {
      if (depth > 0)
        --depth;
    }
  }
  return llvm::StringRef::npos;
}

/// Where the text would crash MLIR 22's parser (its offset, 1-based line
/// and column) and why; see the file comment.
struct UnsafeInput {
  size_t offset, line, column;
  std::string reason;
};

namespace detail {
inline UnsafeInput unsafeAt(llvm::StringRef text, size_t offset,
                            std::string reason) {
  llvm::StringRef before = text.take_front(offset);
  size_t lineStart = before.rfind('\n') + 1; // npos + 1 == 0
  return {offset, size_t(before.count('\n')) + 1, offset - lineStart + 1,
          std::move(reason)};
}
} // namespace detail

inline std::optional<UnsafeInput> findUnsafeInput(llvm::StringRef text) {
  if (size_t deep = findDeepNesting(text); deep != llvm::StringRef::npos)
    return detail::unsafeAt(
        text, deep,
        "nesting deeper than " + std::to_string(kMaxNestingDepth) +
            " levels of (), [], {} or <> (MLIR's parser would overflow "
            "the stack)");
  if (auto huge = findHugeResultNumber(text))
    return detail::unsafeAt(
        text, huge->first,
        "result number in '" + huge->second.str() + "' is above " +
            std::to_string(kMaxResultNumber) +
            " (MLIR's parser would allocate a table that large)");
  static constexpr std::pair<const char *, const char *> kListOps[] = {
      {"linalg.transpose", "permutation"},
      {"linalg.broadcast", "dimensions"},
      {"linalg.reduce", "dimensions"}};
  for (auto [op, keyword] : kListOps) {
    for (size_t at = text.find(op); at != llvm::StringRef::npos;
         at = text.find(op, at + 1)) {
      // The generic form ("linalg.transpose") and comments parse safely.
      size_t lineStart = text.rfind('\n', at) + 1; // npos + 1 == 0
      if ((at > 0 && text[at - 1] == '"') ||
          text.slice(lineStart, at).contains("//"))
        continue;
      size_t word = detail::findBareWord(text, keyword, at + std::strlen(op));
      if (word == llvm::StringRef::npos)
        break;
      size_t eq = detail::skipSpace(text, word + std::strlen(keyword));
      if (eq < text.size() && text[eq] == '=' &&
          detail::isI64List(text, eq + 1))
        continue;
      return detail::unsafeAt(text, word,
                              std::string("'") + keyword + "' of " + op +
                                  " is not a list of integers like [1, 0] "
                                  "(MLIR 22's parser crashes on it)");
    }
  }
  return std::nullopt;
}

} // namespace mlir::pisa

#endif // PISA_SUPPORT_PARSERLIMITS_H
