//===- Options.h - pisa-run command-line options ----------------*- C++ -*-===//
//
// "--name value" and "--flag" options of one subcommand. Every error is one
// line, and pisa-run exits 2 on it.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_TOOLS_PISARUN_OPTIONS_H
#define PISA_TOOLS_PISARUN_OPTIONS_H

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace pisatool {

class Options {
public:
  /// Parses argv[first..] given the names taking a value and the flags.
  static llvm::Expected<Options> parse(int argc, char **argv, int first,
                                       llvm::ArrayRef<llvm::StringRef> valued,
                                       llvm::ArrayRef<llvm::StringRef> flags);

  bool has(llvm::StringRef name) const {
    return values.count(name) || set.count(name);
  }
  llvm::Expected<std::string> str(llvm::StringRef name) const;
  /// An integer option, `fallback` when absent.
  llvm::Expected<int64_t> integer(llvm::StringRef name,
                                  std::optional<int64_t> fallback) const;
  llvm::Expected<std::optional<double>> real(llvm::StringRef name) const;

private:
  llvm::StringMap<std::string> values;
  llvm::StringSet<> set;
};

/// `pisa-run plan ...`: prints the schedule decision as one JSON object.
int runPlan(const Options &options);
/// `pisa-run select ...`: JIT-compiles and runs PISA selection on .npy data.
int runSelect(const Options &options);
/// `pisa-run attend ...`: selection and block-sparse attention as one
/// program.
int runAttend(const Options &options);
/// `pisa-run decode ...`: the selection of each query made token by token
/// over a pyramid cache (pisa.pyramid_append), as a decode loop would.
int runDecode(const Options &options);
/// The three above: `attend` adds V, the attention op and its outputs;
/// `decode` selects over the cache, one appended key per query.
int runSelectOrAttend(const Options &options, bool attend, bool decode = false);

struct SelectConfig;
namespace npy {
struct Array;
}
/// `pisa-run select|attend --cu-seqlens-q ... --cu-seqlens-k ...`: a
/// packed batch of variable lengths (docs/semantics.md, section 7), after
/// runSelectOrAttend has read the common options into `cfg` and the arrays
/// Q and K (and for attend V, and dO with --grad-out).
int runSelectVarlen(const Options &options, SelectConfig cfg,
                    const npy::Array &q, const npy::Array &k,
                    const npy::Array *v = nullptr,
                    const npy::Array *gradOutput = nullptr);

/// Prints "pisa-run: error: <message>" and returns exit code 2.
int fail(const llvm::Twine &message);
int fail(llvm::Error error);

} // namespace pisatool

#endif // PISA_TOOLS_PISARUN_OPTIONS_H
