//===- CommandLine.h - The option rules of pisa-compile and pisa-run -*-===//
//
// Both tools read their command line word by word under the same rules:
//  - "--name=VALUE" is "--name VALUE" (split at the first '=', only in a
//    word that starts with "--"; the value is taken as written, so a value
//    that starts with "--" must be written this way);
//  - an option that takes a value takes the next word, unless there is
//    none or it is an option ("--..." or one of the tool's short options):
//    then the value is missing, and the error says which option came;
//  - a flag given a value, and an option given twice (unless it repeats:
//    a second -o would leave the user guessing which file was written),
//    are errors.
// Errors are one line (usageError, Errors.h), naming the option as
// written ("--q-tile", "-o").
//
//===----------------------------------------------------------------------===//

#ifndef PISA_SUPPORT_COMMANDLINE_H
#define PISA_SUPPORT_COMMANDLINE_H

#include "pisa/Support/Errors.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace mlir::pisa {

/// The integer `text` given for option `name` (as written: "--q-tile"),
/// in [low, high]; else a usage error, "expected an integer for '--q-tile'
/// but got 'TEXT'", naming the range when one is narrower than int64's
/// ("expected an integer in [1, 1024] for ...").
llvm::Expected<int64_t>
parseInteger(llvm::StringRef name, llvm::StringRef text,
             int64_t low = std::numeric_limits<int64_t>::min(),
             int64_t high = std::numeric_limits<int64_t>::max());

class CommandLine {
public:
  /// Reads argv[first..]; `shortOptions` (e.g. "-o") count as options
  /// where a value is expected.
  CommandLine(int argc, char **argv, int first,
              llvm::ArrayRef<llvm::StringRef> shortOptions = {});

  /// Moves to the next word; false after the last.
  bool next();
  /// The current word's name: up to its '=' for a "--name=VALUE" word,
  /// else the whole word.
  llvm::StringRef name() const { return current; }
  /// The current option's value: its inline value or the next word.
  llvm::Expected<std::string> value(bool repeats = false);
  /// Takes the current option as a flag: an error when it was given a value
  /// or given before.
  llvm::Error flag();

private:
  llvm::Error once();

  int argc;
  char **argv;
  int index;
  /// A copy: the caller's list may be a temporary.
  llvm::SmallVector<llvm::StringRef, 4> shortOptions;
  llvm::StringRef current;
  std::optional<std::string> inlineValue;
  llvm::StringSet<> given;
};

} // namespace mlir::pisa

#endif // PISA_SUPPORT_COMMANDLINE_H
