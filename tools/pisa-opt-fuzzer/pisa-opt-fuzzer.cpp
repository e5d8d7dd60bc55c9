//===- pisa-opt-fuzzer.cpp - libFuzzer over pisa-opt ----------------------===//
//
// Each input is parsed as an MLIR module with pisa's dialects, verified,
// and, when it parses, run through one of pisa's passes or pipelines
// (chosen by the input's hash, so that a crash reproduces from its input
// alone). Diagnostics are expected and discarded; crashes, sanitizer
// reports and hangs are findings. Seed it with the lit tests:
//   pisa-opt-fuzzer -runs=10000 CORPUS_DIR test/   (docs/testing.md)
//
//===----------------------------------------------------------------------===//

#include "pisa/InitAllDialects.h"
#include "pisa/InitAllPasses.h"
#include "pisa/Support/ParserLimits.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace mlir;

/// What an input runs through after it verifies. The GPU pipeline stops at
/// PTX text (format=isa): ptxas is another process, outside the fuzzer.
/// Pass pipelines nested under the module the PassManager runs on (no
/// `builtin.module(...)` anchor: that would nest them under modules inside
/// the input and run nothing).
static const char *const kPipelines[] = {
    "pisa-select-schedule{emit-remarks=true}",
    "pisa-select-schedule{force=single-stage}",
    "convert-pisa-to-linalg",
    "pisa-cpu-pipeline",
    "pisa-select-schedule,convert-pisa-to-gpu",
    "pisa-configure-kernels{chip=sm_90}",
    ("pisa-select-schedule,pisa-configure-kernels,convert-pisa-to-gpu,"
     "gpu.module(pisa-vector-to-mma-sync)"),
    "pisa-lower-to-nvvm-pipeline{format=isa}",
    "pisa-add-backward-entries",
    ("pisa-decompose-to-kernels,pisa-configure-kernels{chip=sm_90a "
     "attention-union-queries=4}"),
    "pisa-lower-to-nvvm-pipeline{format=isa attention-union-queries=7}",
};

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

/// Values that probe the limits of shapes and attributes.
static const char *const kInteresting[] = {"0",
                                           "1",
                                           "2",
                                           "3",
                                           "-1",
                                           "7",
                                           "63",
                                           "64",
                                           "65",
                                           "17",
                                           "100",
                                           "4096",
                                           "4097",
                                           "2147483647",
                                           "2147483648",
                                           "4294967296",
                                           "9223372036854775807",
                                           "1000000000"};

/// Half of the time, replace one decimal number of the text by a value
/// from kInteresting (shapes, topk, block_size, offsets are all numbers,
/// and byte-level mutation rarely keeps the text parseable); otherwise
/// libFuzzer's own mutation.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  std::minstd_rand rng(seed);
  if (rng() % 2)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::string text(reinterpret_cast<char *>(data), size);
  std::vector<std::pair<size_t, size_t>> numbers;
  for (size_t i = 0; i < text.size();) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j])))
      ++j;
    numbers.push_back({i, j - i});
    i = j;
  }
  if (numbers.empty())
    return LLVMFuzzerMutate(data, size, maxSize);
  auto [at, len] = numbers[rng() % numbers.size()];
  text.replace(at, len, kInteresting[rng() % std::size(kInteresting)]);
  if (text.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, text.data(), text.size());
  return text.size();
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  pisa::registerAllPasses();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static DialectRegistry *registry = [] {
    auto *r = new DialectRegistry;
    pisa::registerAllDialects(*r);
    return r;
  }();
  // The MLIR lexer reads up to a terminating NUL, as files have one.
  std::string buffer(reinterpret_cast<const char *>(data), size);
  llvm::StringRef text(buffer.c_str(), buffer.size());
  if (pisa::findUnsafeInput(text)) // ParserLimits.h: upstream crashes, skipped
    return 0;
  MLIRContext context(*registry, MLIRContext::Threading::DISABLED);
  ScopedDiagnosticHandler quiet(&context,
                                [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module || failed(verify(*module)))
    return 0;
  size_t choice = llvm::hash_value(text) % std::size(kPipelines);
  PassManager pm(&context);
  if (failed(parsePassPipeline(kPipelines[choice], pm, llvm::nulls())))
    __builtin_trap(); // the list above is ours: it must parse
  (void)pm.run(*module);
  return 0;
}
