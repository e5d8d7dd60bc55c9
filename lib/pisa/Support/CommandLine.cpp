//===- CommandLine.cpp - The option rules of pisa-compile and pisa-run ----===//

#include "pisa/Support/CommandLine.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir::pisa;
using llvm::StringRef;

CommandLine::CommandLine(int argc, char **argv, int first,
                         llvm::ArrayRef<StringRef> shortOptions)
    : argc(argc), argv(argv), index(first - 1),
      shortOptions(shortOptions.begin(), shortOptions.end()) {}

bool CommandLine::next() {
  if (index + 1 >= argc)
    return false;
  current = argv[++index];
  inlineValue.reset();
  if (current.starts_with("--"))
    if (size_t eq = current.find('='); eq != StringRef::npos) {
      inlineValue = current.drop_front(eq + 1).str();
      current = current.take_front(eq);
    }
  return true;
}

llvm::Expected<int64_t> mlir::pisa::parseInteger(StringRef name, StringRef text,
                                                 int64_t low, int64_t high) {
  int64_t value;
  if (!text.getAsInteger(10, value) && value >= low && value <= high)
    return value;
  bool ranged = low != std::numeric_limits<int64_t>::min() ||
                high != std::numeric_limits<int64_t>::max();
  std::string range =
      ranged
          ? (" in [" + llvm::Twine(low) + ", " + llvm::Twine(high) + "]").str()
          : std::string();
  return usageError("expected an integer" + range + " for '" + name +
                    "' but got '" + text + "'");
}

llvm::Error CommandLine::once() {
  if (!given.insert(current).second)
    return usageError("option '" + current + "' given twice");
  return llvm::Error::success();
}

llvm::Error CommandLine::flag() {
  if (inlineValue)
    return usageError("option '" + current + "' takes no value");
  return once();
}

llvm::Expected<std::string> CommandLine::value(bool repeats) {
  if (!repeats)
    if (llvm::Error err = once())
      return std::move(err);
  if (inlineValue)
    return *inlineValue;
  if (index + 1 >= argc)
    return usageError("option '" + current + "' needs a value");
  // An option where the value belongs means the value is missing ('-'
  // alone is a value: standard output).
  StringRef word = argv[index + 1];
  if (word.starts_with("--") || llvm::is_contained(shortOptions, word))
    return usageError("option '" + current +
                      "' needs a value but got option '" + word + "'");
  ++index;
  return word.str();
}
