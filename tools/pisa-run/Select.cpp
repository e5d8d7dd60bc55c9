//===- Select.cpp - pisa-run select, attend and decode: JIT-run PISA
//-------===//
//
// Validates the inputs, builds the program (Program.h), lowers it with
// pisa-cpu-pipeline, JIT-compiles it with the ExecutionEngine, runs it and
// writes the results (ResultArrays.h). Every input problem is found before
// anything is compiled or written, and reported as one line with exit
// code 2.
//
//===----------------------------------------------------------------------===//

#include "Inputs.h"
#include "Jit.h"
#include "Npy.h"
#include "Options.h"
#include "Program.h"
#include "ResultArrays.h"

#include "pisa/Analysis/PyramidLayout.h"
#include "pisa/InitAllDialects.h"
#include "pisa/Support/OutputFiles.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

using namespace mlir;
using namespace pisatool;
namespace npy = pisatool::npy;

namespace {

llvm::Expected<Problem> validate(const npy::Array &q, const npy::Array &k,
                                 const npy::Array *v, const SelectConfig &cfg) {
  auto error = [](const llvm::Twine &msg) {
    return llvm::createStringError(std::errc::invalid_argument,
                                   msg.str().c_str());
  };
  for (auto [name, a, dims] : {std::tuple{"Q", &q, "[B, Hq, N, d]"},
                               std::tuple{"K", &k, "[B, Hkv, N, d]"}}) {
    if (a->shape.size() != 4)
      return error(llvm::Twine("expected ") + name + " to have rank 4 " + dims +
                   " but got rank " + llvm::Twine(a->shape.size()));
    if (a->dtype == npy::DType::I32)
      return error(llvm::Twine("expected ") + name +
                   " to be float32 or float16 but got int32");
    for (int64_t extent : a->shape)
      if (extent < 1)
        return error(llvm::Twine("expected every dimension of ") + name +
                     " to be >= 1 but got a dimension of 0");
  }
  if (q.dtype != k.dtype)
    return error(
        llvm::Twine("expected Q and K to have the same dtype but got ") +
        npy::dtypeName(q.dtype) + " and " + npy::dtypeName(k.dtype));
  Problem p{q.shape[0], q.shape[1], k.shape[1],
            q.shape[2], k.shape[2], q.shape[3]};
  if (k.shape[0] != p.batch)
    return error("expected K to have B = " + llvm::Twine(p.batch) +
                 " like Q but got " + llvm::Twine(k.shape[0]));
  if (k.shape[3] != p.headDim)
    return error("expected K to have d = " + llvm::Twine(p.headDim) +
                 " like Q but got " + llvm::Twine(k.shape[3]));
  if (p.queryHeads % p.kvHeads != 0)
    return error("expected Hq (" + llvm::Twine(p.queryHeads) +
                 ") to be a multiple of Hkv (" + llvm::Twine(p.kvHeads) + ")");
  if (llvm::Error err = checkParams(cfg))
    return std::move(err);
  if (cfg.queryOffset < 0)
    return error("expected --query-offset >= 0 but got " +
                 llvm::Twine(cfg.queryOffset));
  // Both counts are >= 1, so the difference cannot overflow; the sum could.
  if (cfg.queryOffset > p.numKeys - p.numQueries)
    return error("expected query offset (" + llvm::Twine(cfg.queryOffset) +
                 ") + queries in Q (" + llvm::Twine(p.numQueries) +
                 ") <= keys in K (" + llvm::Twine(p.numKeys) + ")");
  if (v) {
    if (v->shape.size() != 4)
      return error("expected V to have rank 4 [B, Hkv, N, dv] but got rank " +
                   llvm::Twine(v->shape.size()));
    if (v->dtype != q.dtype)
      return error(llvm::Twine("expected V to have Q's dtype ") +
                   npy::dtypeName(q.dtype) + " but got " +
                   npy::dtypeName(v->dtype));
    const char *names[] = {"B", "Hkv", "N"};
    for (int i = 0; i < 3; ++i)
      if (v->shape[i] != k.shape[i])
        return error(llvm::Twine("expected V to have ") + names[i] + " = " +
                     llvm::Twine(k.shape[i]) + " like K but got " +
                     llvm::Twine(v->shape[i]));
    if (v->shape[3] < 1)
      return error("expected every dimension of V to be >= 1 but got a "
                   "dimension of 0");
    p.valueDim = v->shape[3];
  }
  for (auto [name, a] :
       {std::pair{"Q", &q}, std::pair{"K", &k}, std::pair{"V", v}})
    if (a)
      if (std::optional<int64_t> at = firstNonFinite(*a))
        return error(llvm::Twine("expected finite values in ") + name +
                     " but element " + llvm::Twine(*at) + " is inf or nan");
  return p;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

} // namespace

/// What an attend call returns: the C interface's result struct.
template <typename E> struct AttendResults {
  StridedMemRefType<E, 4> output;
  StridedMemRefType<float, 3> lse;
  StridedMemRefType<int32_t, 4> selection; ///< absent with --selection-in
};

/// What an attend --grad-out call returns.
template <typename E> struct AttendGradResults {
  StridedMemRefType<E, 4> output;
  StridedMemRefType<float, 3> lse;
  StridedMemRefType<float, 4> dq, dk, dv;
  StridedMemRefType<int32_t, 4> selection; ///< absent with --selection-in
};

int pisatool::runSelect(const Options &options) {
  return runSelectOrAttend(options, /*attend=*/false);
}

int pisatool::runDecode(const Options &options) {
  return runSelectOrAttend(options, /*attend=*/false, /*decode=*/true);
}

int pisatool::runAttend(const Options &options) {
  return runSelectOrAttend(options, /*attend=*/true);
}

int pisatool::runSelectOrAttend(const Options &options, bool attend,
                                bool decode) {
  SelectConfig cfg;
  cfg.attend = attend;
  cfg.decode = decode;
  auto qPath = options.str("q");
  if (!qPath)
    return fail(qPath.takeError());
  auto kPath = options.str("k");
  if (!kPath)
    return fail(kPath.takeError());
  auto out = options.str("out");
  if (!out)
    return fail(out.takeError());
  cfg.outPath = *out;
  for (auto [name, field, fallback] :
       {std::tuple{"block-size", &cfg.blockSize, std::optional<int64_t>()},
        std::tuple{"topk", &cfg.topK, std::optional<int64_t>()},
        std::tuple{"branching", &cfg.branching, std::optional<int64_t>(2)},
        std::tuple{"query-offset", &cfg.queryOffset,
                   std::optional<int64_t>(0)}}) {
    auto value = options.integer(name, fallback);
    if (!value)
      return fail(value.takeError());
    *field = *value;
  }
  cfg.dumpIR = options.has("dump-ir");
  if (!options.has("no-cache")) {
    auto dir = options.has("cache-dir")
                   ? options.str("cache-dir")
                   : llvm::Expected<std::string>(defaultCacheDir());
    if (!dir)
      return fail(dir.takeError());
    cfg.cacheDir = *dir;
  }
  cfg.staticShapes = options.has("static-shapes");
  cfg.tokenMajor = options.has("token-major");
  for (auto [name, field] : {std::pair{"lse-out", &cfg.lseOutPath},
                             std::pair{"selection-out", &cfg.selectionOutPath},
                             std::pair{"selection-in", &cfg.selectionInPath},
                             std::pair{"grad-out", &cfg.gradOutPath},
                             std::pair{"dq-out", &cfg.dqOutPath},
                             std::pair{"dk-out", &cfg.dkOutPath},
                             std::pair{"dv-out", &cfg.dvOutPath}})
    if (attend && options.has(name)) {
      auto path = options.str(name);
      if (!path)
        return fail(path.takeError());
      *field = *path;
    }
  // dO and the three gradients come together.
  if (cfg.grad() != !cfg.dqOutPath.empty() ||
      cfg.grad() != !cfg.dkOutPath.empty() ||
      cfg.grad() != !cfg.dvOutPath.empty())
    return fail("expected --grad-out, --dq-out, --dk-out and --dv-out "
                "together");
  // An output that is an input or another output is refused before any
  // work (pisa/Support/OutputFiles.h).
  {
    std::vector<std::string> inputs{*qPath, *kPath, cfg.selectionInPath,
                                    cfg.gradOutPath};
    for (const char *name : {"v", "cu-seqlens-q", "cu-seqlens-k"}) {
      if (!options.has(name))
        continue;
      if (auto path = options.str(name))
        inputs.push_back(*path);
      else
        llvm::consumeError(path.takeError());
    }
    if (llvm::Error err = mlir::pisa::checkOutputs(
            inputs, {cfg.outPath, cfg.lseOutPath, cfg.selectionOutPath,
                     cfg.dqOutPath, cfg.dkOutPath, cfg.dvOutPath}))
      return fail(std::move(err));
  }
  std::optional<npy::Array> v;
  if (attend) {
    auto vPath = options.str("v");
    if (!vPath)
      return fail(vPath.takeError());
    auto read = npy::read(*vPath);
    if (!read)
      return fail(read.takeError());
    v = std::move(*read);
  }
  std::optional<npy::Array> gradOutput;
  if (cfg.grad()) {
    auto read = npy::read(cfg.gradOutPath);
    if (!read)
      return fail(read.takeError());
    gradOutput = std::move(*read);
  }
  std::optional<npy::Array> givenSelection;
  if (!cfg.selectionInPath.empty()) {
    auto read = npy::read(cfg.selectionInPath);
    if (!read)
      return fail(read.takeError());
    givenSelection = std::move(*read);
  }

  auto q = npy::read(*qPath);
  if (!q)
    return fail(q.takeError());
  auto k = npy::read(*kPath);
  if (!k)
    return fail(k.takeError());
  auto scale = options.real("scale");
  if (!scale)
    return fail(scale.takeError());
  cfg.scale = *scale
                  ? float(**scale)
                  : (q->shape.size() == 4 ? 1.0f / std::sqrt(float(q->shape[3]))
                                          : 1.0f);
  if (options.has("cu-seqlens-q") || options.has("cu-seqlens-k")) {
    if (decode)
      return fail("expected --cu-seqlens-q/k with select or attend (a "
                  "packed batch is not supported by decode)");
    if (givenSelection)
      return fail("expected no --selection-in with --cu-seqlens-q/k");
    return runSelectVarlen(options, cfg, *q, *k, v ? &*v : nullptr,
                           gradOutput ? &*gradOutput : nullptr);
  }
  // --token-major arrays are validated as [B, H, T, d] (dims 1 and 2
  // swapped in their shapes only, for the check), then passed as they are.
  auto swapHeadsAndTokens = [&] {
    for (npy::Array *a : {&*q, &*k})
      if (a->shape.size() == 4)
        std::swap(a->shape[1], a->shape[2]);
  };
  if (cfg.tokenMajor && (attend || decode))
    return fail("expected --token-major with select only");
  if (cfg.tokenMajor)
    swapHeadsAndTokens();
  auto problem = validate(*q, *k, v ? &*v : nullptr, cfg);
  if (cfg.tokenMajor)
    swapHeadsAndTokens();
  if (problem && givenSelection) {
    const npy::Array &sel = *givenSelection;
    std::vector<int64_t> want{problem->batch, problem->kvHeads,
                              problem->numQueries, cfg.topK};
    if (sel.dtype != npy::DType::I32 || sel.shape != want)
      return fail("expected --selection-in to be int32 [B, Hkv, Nq, K] = [" +
                  std::to_string(want[0]) + ", " + std::to_string(want[1]) +
                  ", " + std::to_string(want[2]) + ", " +
                  std::to_string(want[3]) + "]");
  }
  if (!problem)
    return fail(problem.takeError());
  if (gradOutput) {
    std::vector<int64_t> want{problem->batch, problem->queryHeads,
                              problem->numQueries, problem->valueDim};
    if (gradOutput->dtype != q->dtype || gradOutput->shape != want)
      return fail(std::string("expected --grad-out to be ") +
                  (q->dtype == npy::DType::F16 ? "float16" : "float32") +
                  " [B, Hq, Nq, dv] = [" + std::to_string(want[0]) + ", " +
                  std::to_string(want[1]) + ", " + std::to_string(want[2]) +
                  ", " + std::to_string(want[3]) + "] like the output");
  }

  CompileContext compile;
  MLIRContext &ctx = compile.get();
  std::string &diagnostic = compile.diagnostic;

  Type elemType = q->dtype == npy::DType::F16 ? Type(Float16Type::get(&ctx))
                                              : Type(Float32Type::get(&ctx));
  OwningOpRef<ModuleOp> module = buildModule(ctx, *problem, cfg, elemType);
  auto compileStart = std::chrono::steady_clock::now();
  auto engine =
      compileForHost(*module, "select", diagnostic, cfg.dumpIR, cfg.cacheDir);
  if (!engine)
    return fail(engine.takeError());
  double compileSeconds = secondsSince(compileStart);

  int64_t offset = cfg.queryOffset;
  auto runStart = std::chrono::steady_clock::now();
  npy::Array selection, output, lse, dq, dk, dv;
  // The C interface takes the result (a struct of descriptors when there
  // are several) first; results are owned by the caller.
  auto run = [&](auto tag) -> llvm::Error {
    using E = decltype(tag);
    auto qDesc = describe<E>(*q), kDesc = describe<E>(*k);
    auto *qPtr = &qDesc, *kPtr = &kDesc;
    if (!cfg.attend) {
      StridedMemRefType<int32_t, 4> result;
      std::memset(&result, 0, sizeof(result));
      auto *resultPtr = &result;
      if (llvm::Error e =
              (*engine)->invoke("select", resultPtr, qPtr, kPtr, offset))
        return e;
      selection = toNpy(result, npy::DType::I32, &same<int32_t>);
      std::free(result.basePtr);
      return llvm::Error::success();
    }
    auto vDesc = describe<E>(*v);
    auto *vPtr = &vDesc;
    // The given selection, then dO, come after v.
    auto invokeAttend = [&](auto *resultsPtr, auto... extra) -> llvm::Error {
      if (givenSelection) {
        auto selDesc = describe<int32_t>(*givenSelection);
        auto *selPtr = &selDesc;
        return (*engine)->invoke("select", resultsPtr, qPtr, kPtr, vPtr, selPtr,
                                 extra..., offset);
      }
      return (*engine)->invoke("select", resultsPtr, qPtr, kPtr, vPtr, extra...,
                               offset);
    };
    auto collect = [&](auto &results) {
      output = takeAsF32(results.output);
      lse = takeF32(results.lse);
      if (givenSelection) {
        selection = *givenSelection;
      } else {
        selection = toNpy(results.selection, npy::DType::I32, &same<int32_t>);
        std::free(results.selection.basePtr);
      }
    };
    if (!cfg.grad()) {
      AttendResults<E> results;
      std::memset(&results, 0, sizeof(results));
      if (llvm::Error e = invokeAttend(&results))
        return e;
      collect(results);
      return llvm::Error::success();
    }
    AttendGradResults<E> results;
    std::memset(&results, 0, sizeof(results));
    auto dDesc = describe<E>(*gradOutput);
    auto *dPtr = &dDesc;
    if (llvm::Error e = invokeAttend(&results, dPtr))
      return e;
    collect(results);
    dq = takeF32(results.dq);
    dk = takeF32(results.dk);
    dv = takeF32(results.dv);
    return llvm::Error::success();
  };
  // Declared with its value: an llvm::Error assigned over an unchecked one
  // aborts where LLVM keeps its ABI-breaking checks.
  if (llvm::Error err =
          q->dtype == npy::DType::F16 ? run(uint16_t()) : run(float()))
    return fail(std::move(err));
  double runSeconds = secondsSince(runStart);

  llvm::Error werr = cfg.attend ? writeAll({{cfg.outPath, &output},
                                            {cfg.lseOutPath, &lse},
                                            {cfg.selectionOutPath, &selection},
                                            {cfg.dqOutPath, &dq},
                                            {cfg.dkOutPath, &dk},
                                            {cfg.dvOutPath, &dv}})
                                : writeAll({{cfg.outPath, &selection}});
  if (werr)
    return fail(std::move(werr));

  mlir::pisa::PyramidLayout layout(problem->numKeys, cfg.blockSize,
                                   cfg.branching);
  llvm::outs() << llvm::format(
      "pisa-run: %s K=%lld of %lld leaf blocks (C=%lld, g=%lld, %lld "
      "levels) for %lld queries x %lld KV heads x B=%lld, G=%lld, d=%lld; "
      "compile %.2f s%s, run %.3f s; wrote %s%s\n",
      cfg.attend ? "attended over" : "selected", (long long)cfg.topK,
      (long long)layout.numLeaves(), (long long)cfg.blockSize,
      (long long)cfg.branching, (long long)layout.numLevels(),
      (long long)problem->numQueries, (long long)problem->kvHeads,
      (long long)problem->batch,
      (long long)(problem->queryHeads / problem->kvHeads),
      (long long)problem->headDim, compileSeconds,
      (*engine)->fromCache() ? " (cached)" : "", runSeconds,
      cfg.outPath.c_str(),
      cfg.grad() ? (" and the gradients " + cfg.dqOutPath + ", " +
                    cfg.dkOutPath + ", " + cfg.dvOutPath)
                       .c_str()
                 : "");
  return 0;
}
