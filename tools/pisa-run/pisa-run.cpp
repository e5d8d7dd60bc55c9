//===- pisa-run.cpp - Run pisa programs on .npy data ----------------------===//
//
//   pisa-run select --q Q.npy --k K.npy --block-size C --topk K
//       [--branching g] [--scale S] [--query-offset T] [--dump-ir] --out
//       OUT.npy
//   pisa-run plan --group-size G --block-size C --q-tile T --queries N
//       [--head-dim d] [--dtype bf16|f16|f32] [--policy paper|refined]
//
// Bad input is one line on stderr and exit code 2; no output file is left.
//
//===----------------------------------------------------------------------===//

#include "Options.h"

#include "pisa/Support/CommandLine.h"
#include "pisa/Version.h"

#include "llvm/Config/llvm-config.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <vector>

using namespace pisatool;
using llvm::StringRef;
using mlir::pisa::usageError;

int pisatool::fail(const llvm::Twine &message) {
  llvm::errs() << "pisa-run: error: " << message << "\n";
  return 2;
}

int pisatool::fail(llvm::Error error) {
  return fail(llvm::toString(std::move(error)));
}

llvm::Expected<Options> Options::parse(int argc, char **argv, int first,
                                       llvm::ArrayRef<StringRef> valued,
                                       llvm::ArrayRef<StringRef> flags) {
  Options options;
  mlir::pisa::CommandLine line(argc, argv, first);
  while (line.next()) {
    StringRef arg = line.name();
    if (!arg.starts_with("--"))
      return usageError("unexpected argument '" + arg + "'");
    StringRef name = arg.drop_front(2);
    if (llvm::is_contained(flags, name)) {
      if (llvm::Error err = line.flag())
        return std::move(err);
      options.set.insert(name);
      continue;
    }
    if (!llvm::is_contained(valued, name))
      return usageError("unknown option '--" + name + "'");
    llvm::Expected<std::string> value = line.value();
    if (!value)
      return value.takeError();
    options.values[name] = std::move(*value);
  }
  return options;
}

llvm::Expected<std::string> Options::str(StringRef name) const {
  auto it = values.find(name);
  if (it == values.end())
    return usageError("missing required option '--" + name + "'");
  return it->second;
}

llvm::Expected<int64_t>
Options::integer(StringRef name, std::optional<int64_t> fallback) const {
  auto it = values.find(name);
  if (it == values.end()) {
    if (fallback)
      return *fallback;
    return usageError("missing required option '--" + name + "'");
  }
  return mlir::pisa::parseInteger(("--" + name).str(), it->second);
}

llvm::Expected<std::optional<double>> Options::real(StringRef name) const {
  auto it = values.find(name);
  if (it == values.end())
    return std::optional<double>();
  char *end = nullptr;
  double value = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0')
    return usageError("expected a number for '--" + name + "' but got '" +
                      it->second + "'");
  return std::optional<double>(value);
}

static void usage(llvm::raw_ostream &os) {
  os << "usage: pisa-run select --q Q.npy --k K.npy --block-size C --topk K\n"
        "           [--branching g] [--scale S] [--query-offset T] "
        "[--dump-ir]\n"
        "           [--static-shapes]  (compile for these exact sizes; the\n"
        "           default program takes any B, N and Nq)\n"
        "           [--token-major]  (Q [B, Nq, Hq, d], K [B, N, Hkv, d] and\n"
        "           OUT [B, Nq, Hkv, K], read and written in place)\n"
        "           --out OUT.npy\n"
        "       pisa-run select --q Q.npy --k K.npy --cu-seqlens-q CQ.npy\n"
        "           --cu-seqlens-k CK.npy --block-size C --topk K [--branching "
        "g]\n"
        "           [--scale S] --out OUT.npy  (a packed batch of B "
        "sequences:\n"
        "           Q [Tq, Hq, d], K [Tk, Hkv, d], int32 [B + 1] offsets; "
        "each\n"
        "           sequence's queries are its last positions; OUT [Tq, Hkv, "
        "K])\n"
        "       pisa-run decode --q Q.npy --k K.npy --block-size C --topk K\n"
        "           [--branching g] [--scale S] [--query-offset T] --out "
        "OUT.npy\n"
        "           (query i selects over keys 0..T+i and a pyramid cache "
        "that\n"
        "           grows by one key per query, as in decoding)\n"
        "       pisa-run attend --q Q.npy --k K.npy --v V.npy --block-size C\n"
        "           --topk K [--branching g] [--scale S] [--query-offset T]\n"
        "           --out O.npy [--lse-out L.npy] [--selection-out S.npy]\n"
        "           [--selection-in S.npy]  (attend over a given selection)\n"
        "           [--grad-out DO.npy --dq-out DQ.npy --dk-out DK.npy\n"
        "            --dv-out DV.npy]  (also the gradients of a loss L with\n"
        "            dL/dO = DO with respect to Q, K, V, float32)\n"
        "           [--cu-seqlens-q CQ.npy --cu-seqlens-k CK.npy]  (a packed\n"
        "            batch: Q [Tq, Hq, d], K [Tk, Hkv, d], V [Tk, Hkv, dv],\n"
        "            O [Tq, Hq, dv], L [Tq, Hq], S [Tq, Hkv, K])\n"
        "           [--dump-ir] [--static-shapes]\n"
        "       select, decode and attend keep each compiled program in\n"
        "           --cache-dir DIR (default $PISA_CACHE_DIR, else\n"
        "           $XDG_CACHE_HOME/pisa or ~/.cache/pisa) and load it on the\n"
        "           next run of the same program on this CPU; --no-cache\n"
        "           compiles every time\n"
        "       pisa-run plan --group-size G --block-size C --q-tile T\n"
        "           --queries N [--head-dim d] [--dtype bf16|f16|f32]\n"
        "           [--policy paper|refined]\n"
        "           [--keys N --topk K --branching g]  (work against flat\n"
        "           block selection)\n"
        "       every --name VALUE may be written --name=VALUE (a VALUE\n"
        "           that starts with \"--\" must be); each option is given\n"
        "           once\n";
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  if (argc < 2) {
    usage(llvm::errs());
    return 2;
  }
  StringRef command = argv[1];
  if (command == "--help" || command == "-h") {
    usage(llvm::outs());
    return 0;
  }
  if (command == "--version") {
    llvm::outs() << "pisa-run (pisa " PISA_VERSION_STRING
                    ", LLVM/MLIR " LLVM_VERSION_STRING ")\n";
    return 0;
  }
  // `pisa-run COMMAND --help` anywhere on the line.
  for (int i = 2; i < argc; ++i)
    if (StringRef(argv[i]) == "--help" || StringRef(argv[i]) == "-h") {
      usage(llvm::outs());
      return 0;
    }
  // Each command: its valued options, its flags, what runs it.
  struct Command {
    StringRef name;
    std::vector<StringRef> valued, flags;
    int (*run)(const Options &);
  };
  const std::vector<StringRef> selection{
      "q",         "k",     "block-size",   "topk",
      "branching", "scale", "query-offset", "out",
      "cache-dir"};
  auto with = [](std::vector<StringRef> base,
                 std::initializer_list<StringRef> more) {
    base.insert(base.end(), more);
    return base;
  };
  const Command commands[] = {
      {"select",
       with(selection, {"cu-seqlens-q", "cu-seqlens-k"}),
       {"dump-ir", "static-shapes", "token-major", "no-cache"},
       runSelect},
      {"decode", selection, {"dump-ir", "no-cache"}, runDecode},
      {"attend",
       with(selection,
            {"v", "lse-out", "selection-out", "selection-in", "grad-out",
             "dq-out", "dk-out", "dv-out", "cu-seqlens-q", "cu-seqlens-k"}),
       {"dump-ir", "static-shapes", "no-cache"},
       runAttend},
      {"plan",
       {"group-size", "block-size", "q-tile", "queries", "head-dim", "dtype",
        "policy", "keys", "topk", "branching"},
       {},
       runPlan},
  };
  for (const Command &c : commands) {
    if (command != c.name)
      continue;
    auto options = Options::parse(argc, argv, 2, c.valued, c.flags);
    if (!options)
      return fail(options.takeError());
    return c.run(*options);
  }
  return fail("unknown command '" + command +
              "' (expected select, decode, attend or plan)");
}
