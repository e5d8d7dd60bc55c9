//===- SelectVarlen.cpp - pisa-run select|attend on a packed batch -------===//
//
// `pisa-run select --cu-seqlens-q CQ.npy --cu-seqlens-k CK.npy ...`: Q
// [Tq, Hq, d] and K [Tk, Hkv, d] pack B sequences token-major
// (docs/semantics.md, section 7); the program is pyramid_build_varlen +
// hier_topk_varlen with Tq, Tk and B dynamic, and the result is int32
// [Tq, Hkv, K]. `pisa-run attend` adds V [Tk, Hkv, dv] and
// sparse_attention_varlen (output [Tq, Hq, dv], LSE [Tq, Hq]), and with
// --grad-out dO [Tq, Hq, dv] sparse_attention_grad_varlen (dq, dk, dv
// float32 in the layouts of Q, K and V). Every rule on the inputs is
// checked before anything is compiled or written.
//
//===----------------------------------------------------------------------===//

#include "Inputs.h"
#include "Jit.h"
#include "Npy.h"
#include "Options.h"
#include "ResultArrays.h"

#include "pisa/IR/PisaOps.h"
#include "pisa/InitAllDialects.h"
#include "pisa/Support/Errors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/Format.h"

#include <chrono>
#include <cstring>

using namespace mlir;
using namespace pisatool;
namespace npy = pisatool::npy;
using mlir::pisa::invalidInput;

namespace {

struct VarlenProblem {
  int64_t sequences, queryRows, keyRows, queryHeads, kvHeads, headDim;
  int64_t valueDim = 0; ///< dv (attend)
};

int32_t at(const npy::Array &a, int64_t i) {
  int32_t v;
  std::memcpy(&v, a.data.data() + 4 * i, 4);
  return v;
}

/// cu_seqlens of `rows` packed rows: int32 [B + 1], 0 first, never
/// decreasing, `rows` last.
llvm::Error checkCuSeqlens(const char *name, const npy::Array &cu,
                           int64_t rows) {
  if (cu.dtype != npy::DType::I32 || cu.shape.size() != 1 || cu.shape[0] < 1)
    return invalidInput(llvm::Twine("expected --") + name +
                        " to be int32 [B + 1] with B >= 0");
  int64_t n = cu.shape[0];
  if (at(cu, 0) != 0)
    return invalidInput(llvm::Twine("expected --") + name +
                        " to start at 0 but got " + llvm::Twine(at(cu, 0)));
  for (int64_t i = 1; i < n; ++i)
    if (at(cu, i) < at(cu, i - 1))
      return invalidInput(llvm::Twine("expected --") + name +
                          " to be non-decreasing but entry " + llvm::Twine(i) +
                          " (" + llvm::Twine(at(cu, i)) + ") < entry " +
                          llvm::Twine(i - 1) + " (" +
                          llvm::Twine(at(cu, i - 1)) + ")");
  if (at(cu, n - 1) != rows)
    return invalidInput(llvm::Twine("expected --") + name + " to end at " +
                        llvm::Twine(rows) + " (the rows packed) but got " +
                        llvm::Twine(at(cu, n - 1)));
  return llvm::Error::success();
}

/// V [Tk, Hkv, dv] beside K, and dO [Tq, Hq, dv] beside Q, of Q's dtype.
llvm::Error checkValues(VarlenProblem &p, const npy::Array &q,
                        const npy::Array *v, const npy::Array *gradOutput) {
  if (v) {
    if (v->shape.size() != 3 || v->dtype != q.dtype ||
        v->shape[0] != p.keyRows || v->shape[1] != p.kvHeads || v->shape[2] < 1)
      return invalidInput("expected V to be " +
                          llvm::Twine(npy::dtypeName(q.dtype)) +
                          " [Tk, Hkv, dv] with Tk = " + llvm::Twine(p.keyRows) +
                          ", Hkv = " + llvm::Twine(p.kvHeads) + " and dv >= 1");
    p.valueDim = v->shape[2];
  }
  if (gradOutput) {
    std::vector<int64_t> want{p.queryRows, p.queryHeads, p.valueDim};
    if (gradOutput->dtype != q.dtype || gradOutput->shape != want)
      return invalidInput("expected --grad-out to be " +
                          llvm::Twine(npy::dtypeName(q.dtype)) +
                          " [Tq, Hq, dv] = [" + llvm::Twine(want[0]) + ", " +
                          llvm::Twine(want[1]) + ", " + llvm::Twine(want[2]) +
                          "] like the output");
  }
  for (auto [name, a] : {std::pair{"V", v}, std::pair{"dO", gradOutput}})
    if (a)
      if (std::optional<int64_t> at = firstNonFinite(*a))
        return invalidInput(llvm::Twine("expected finite values in ") + name +
                            " but element " + llvm::Twine(*at) +
                            " is inf or nan");
  return llvm::Error::success();
}

llvm::Expected<VarlenProblem>
validate(const npy::Array &q, const npy::Array &k, const npy::Array &cuQ,
         const npy::Array &cuK, const SelectConfig &cfg, const npy::Array *v,
         const npy::Array *gradOutput) {
  for (auto [name, a, dims] : {std::tuple{"Q", &q, "[Tq, Hq, d]"},
                               std::tuple{"K", &k, "[Tk, Hkv, d]"}}) {
    if (a->shape.size() != 3)
      return invalidInput(llvm::Twine("expected ") + name + " to have rank 3 " +
                          dims + " with --cu-seqlens-q/k but got rank " +
                          llvm::Twine(a->shape.size()));
    if (a->dtype == npy::DType::I32)
      return invalidInput(llvm::Twine("expected ") + name +
                          " to be float32 or float16 but got int32");
    if (a->shape[1] < 1 || a->shape[2] < 1)
      return invalidInput(llvm::Twine("expected the heads and d of ") + name +
                          " to be >= 1");
  }
  if (q.dtype != k.dtype)
    return invalidInput(
        llvm::Twine("expected Q and K to have the same dtype but got ") +
        npy::dtypeName(q.dtype) + " and " + npy::dtypeName(k.dtype));
  VarlenProblem p{0,          q.shape[0], k.shape[0],
                  q.shape[1], k.shape[1], q.shape[2]};
  if (k.shape[2] != p.headDim)
    return invalidInput("expected K to have d = " + llvm::Twine(p.headDim) +
                        " like Q but got " + llvm::Twine(k.shape[2]));
  if (p.queryHeads % p.kvHeads != 0)
    return invalidInput("expected Hq (" + llvm::Twine(p.queryHeads) +
                        ") to be a multiple of Hkv (" + llvm::Twine(p.kvHeads) +
                        ")");
  if (cfg.queryOffset != 0)
    return invalidInput("expected no --query-offset with --cu-seqlens-q/k (a "
                        "sequence's queries are its last positions)");
  if (llvm::Error err = checkParams(cfg))
    return std::move(err);
  if (llvm::Error err = checkCuSeqlens("cu-seqlens-q", cuQ, p.queryRows))
    return std::move(err);
  if (llvm::Error err = checkCuSeqlens("cu-seqlens-k", cuK, p.keyRows))
    return std::move(err);
  if (cuQ.shape[0] != cuK.shape[0])
    return invalidInput(
        "expected --cu-seqlens-q and --cu-seqlens-k to give the same "
        "B but got " +
        llvm::Twine(cuQ.shape[0] - 1) + " and " +
        llvm::Twine(cuK.shape[0] - 1));
  p.sequences = cuK.shape[0] - 1;
  for (int64_t b = 0; b < p.sequences; ++b) {
    int64_t nq = at(cuQ, b + 1) - at(cuQ, b), n = at(cuK, b + 1) - at(cuK, b);
    if (nq > n)
      return invalidInput(
          "expected every sequence to have no more queries than "
          "keys but sequence " +
          llvm::Twine(b) + " has " + llvm::Twine(nq) + " > " + llvm::Twine(n));
  }
  for (auto [name, a] : {std::pair{"Q", &q}, std::pair{"K", &k}})
    if (std::optional<int64_t> at = firstNonFinite(*a))
      return invalidInput(llvm::Twine("expected finite values in ") + name +
                          " but element " + llvm::Twine(*at) +
                          " is inf or nan");
  if (llvm::Error err = checkValues(p, q, v, gradOutput))
    return std::move(err);
  return p;
}

/// func.func @select(%q, %k, %cu_q, %cu_k) -> [Tq, Hkv, K], Tq, Tk and B
/// dynamic: one program per head layout, d, C, K, g and dtype. attend:
/// (%q, %k, %v, %cu_q, %cu_k [, %dO]) -> (output, LSE, [dq, dk, dv,]
/// selection).
OwningOpRef<ModuleOp> buildVarlenModule(MLIRContext &ctx,
                                        const VarlenProblem &p,
                                        const SelectConfig &cfg, Type elem) {
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  const int64_t any = ShapedType::kDynamic;
  Type f32 = b.getF32Type();
  auto qType = RankedTensorType::get({any, p.queryHeads, p.headDim}, elem);
  auto kType = RankedTensorType::get({any, p.kvHeads, p.headDim}, elem);
  auto vType = RankedTensorType::get({any, p.kvHeads, p.valueDim}, elem);
  auto oType = RankedTensorType::get({any, p.queryHeads, p.valueDim}, elem);
  auto lseType = RankedTensorType::get({any, p.queryHeads}, f32);
  auto cuType = RankedTensorType::get({any}, b.getI32Type());
  auto pType = RankedTensorType::get({any, p.kvHeads, p.headDim}, f32);
  auto selType =
      RankedTensorType::get({any, p.kvHeads, cfg.topK}, b.getI32Type());
  auto f32Like = [&](RankedTensorType t) {
    return RankedTensorType::get(t.getShape(), f32);
  };
  SmallVector<Type> inputs{qType, kType}, results;
  if (cfg.attend) {
    inputs.push_back(vType);
    results = {oType, lseType};
    if (cfg.grad())
      results.append({f32Like(qType), f32Like(kType), f32Like(vType)});
  }
  results.push_back(selType);
  inputs.append({cuType, cuType});
  if (cfg.grad())
    inputs.push_back(oType);
  auto func = func::FuncOp::create(b, loc, "select",
                                   b.getFunctionType(inputs, results));
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *body = func.addEntryBlock();
  b.setInsertionPointToStart(body);
  const unsigned cuAt = cfg.attend ? 3 : 2;
  Value q = body->getArgument(0), k = body->getArgument(1);
  Value cuQ = body->getArgument(cuAt), cuK = body->getArgument(cuAt + 1);
  Value pyramid = pisa::PyramidBuildVarlenOp::create(
      b, loc, pType, k, cuK, cfg.blockSize, cfg.branching);
  FloatAttr scale = b.getF32FloatAttr(cfg.scale);
  Value sel = pisa::HierTopKVarlenOp::create(
      b, loc, selType, q, k, pyramid, cuQ, cuK, cfg.topK, cfg.blockSize,
      cfg.branching, scale, /*schedule=*/nullptr);
  SmallVector<Value> values;
  if (cfg.attend) {
    Value v = body->getArgument(2);
    auto attention = pisa::SparseAttentionVarlenOp::create(
        b, loc, TypeRange{oType, lseType}, q, k, v, sel, cuQ, cuK,
        cfg.blockSize, scale);
    llvm::append_range(values, attention.getResults());
    if (cfg.grad()) {
      auto grad = pisa::SparseAttentionGradVarlenOp::create(
          b, loc, TypeRange{f32Like(qType), f32Like(kType), f32Like(vType)}, q,
          k, v, sel, cuQ, cuK, attention.getOutput(), attention.getLse(),
          body->getArgument(cuAt + 2), cfg.blockSize, scale);
      llvm::append_range(values, grad.getResults());
    }
  }
  values.push_back(sel);
  func::ReturnOp::create(b, loc, values);
  return module;
}

/// What a packed attend call returns (the C interface's result struct).
template <typename E> struct VarlenAttendResults {
  StridedMemRefType<E, 3> output;
  StridedMemRefType<float, 2> lse;
  StridedMemRefType<int32_t, 3> selection;
};
template <typename E> struct VarlenAttendGradResults {
  StridedMemRefType<E, 3> output;
  StridedMemRefType<float, 2> lse;
  StridedMemRefType<float, 3> dq, dk, dv;
  StridedMemRefType<int32_t, 3> selection;
};

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

} // namespace

int pisatool::runSelectVarlen(const Options &options, SelectConfig cfg,
                              const npy::Array &q, const npy::Array &k,
                              const npy::Array *v,
                              const npy::Array *gradOutput) {
  if (!options.has("cu-seqlens-q") || !options.has("cu-seqlens-k"))
    return fail("expected both --cu-seqlens-q and --cu-seqlens-k");
  if (cfg.staticShapes)
    return fail("expected no --static-shapes with --cu-seqlens-q/k (one "
                "program serves every packed batch)");
  llvm::Expected<npy::Array> cu[2] = {npy::read(*options.str("cu-seqlens-q")),
                                      npy::read(*options.str("cu-seqlens-k"))};
  for (auto &a : cu)
    if (!a)
      return fail(a.takeError());
  const npy::Array &cuQ = *cu[0], &cuK = *cu[1];
  if (!options.has("scale") && q.shape.size() == 3)
    cfg.scale = 1.0f / std::sqrt(float(q.shape[2]));
  auto problem = validate(q, k, cuQ, cuK, cfg, v, gradOutput);
  if (!problem)
    return fail(problem.takeError());

  CompileContext compile;
  MLIRContext &ctx = compile.get();
  std::string &diagnostic = compile.diagnostic;
  Type elem = q.dtype == npy::DType::F16 ? Type(Float16Type::get(&ctx))
                                         : Type(Float32Type::get(&ctx));
  OwningOpRef<ModuleOp> module = buildVarlenModule(ctx, *problem, cfg, elem);
  auto compileStart = std::chrono::steady_clock::now();
  auto engine =
      compileForHost(*module, "select", diagnostic, cfg.dumpIR, cfg.cacheDir);
  if (!engine)
    return fail(engine.takeError());
  double compileSeconds = secondsSince(compileStart);

  auto runStart = std::chrono::steady_clock::now();
  npy::Array selection, output, lse, dq, dk, dv;
  auto run = [&](auto tag) -> llvm::Error {
    using E = decltype(tag);
    auto qDesc = describe<E, 3>(q), kDesc = describe<E, 3>(k);
    auto cuQDesc = describe<int32_t, 1>(cuQ),
         cuKDesc = describe<int32_t, 1>(cuK);
    auto *qPtr = &qDesc, *kPtr = &kDesc;
    auto *cuQPtr = &cuQDesc, *cuKPtr = &cuKDesc;
    auto takeSelection = [&](StridedMemRefType<int32_t, 3> &result) {
      selection = toNpy(result, npy::DType::I32, &same<int32_t>);
      std::free(result.basePtr);
    };
    if (!cfg.attend) {
      StridedMemRefType<int32_t, 3> result;
      std::memset(&result, 0, sizeof(result));
      auto *resultPtr = &result;
      if (llvm::Error e = (*engine)->invoke("select", resultPtr, qPtr, kPtr,
                                            cuQPtr, cuKPtr))
        return e;
      takeSelection(result);
      return llvm::Error::success();
    }
    auto vDesc = describe<E, 3>(*v);
    auto *vPtr = &vDesc;
    auto takeAttention = [&](auto &results) {
      output = takeAsF32(results.output);
      lse = takeF32(results.lse);
      takeSelection(results.selection);
    };
    if (!cfg.grad()) {
      VarlenAttendResults<E> results;
      std::memset(&results, 0, sizeof(results));
      auto *resultsPtr = &results;
      if (llvm::Error e = (*engine)->invoke("select", resultsPtr, qPtr, kPtr,
                                            vPtr, cuQPtr, cuKPtr))
        return e;
      takeAttention(results);
      return llvm::Error::success();
    }
    VarlenAttendGradResults<E> results;
    std::memset(&results, 0, sizeof(results));
    auto *resultsPtr = &results;
    auto dDesc = describe<E, 3>(*gradOutput);
    auto *dPtr = &dDesc;
    if (llvm::Error e = (*engine)->invoke("select", resultsPtr, qPtr, kPtr,
                                          vPtr, cuQPtr, cuKPtr, dPtr))
      return e;
    takeAttention(results);
    dq = takeF32(results.dq);
    dk = takeF32(results.dk);
    dv = takeF32(results.dv);
    return llvm::Error::success();
  };
  llvm::Error err = q.dtype == npy::DType::F16 ? run(uint16_t()) : run(float());
  if (err)
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
  llvm::outs() << llvm::format(
      "pisa-run: %s K=%lld leaf blocks (C=%lld, g=%lld) for %lld query "
      "rows of B=%lld packed sequences (%lld key rows) x %lld KV heads, "
      "G=%lld, d=%lld; compile %.2f s%s, run %.3f s; wrote %s\n",
      cfg.attend ? "attended over" : "selected", (long long)cfg.topK,
      (long long)cfg.blockSize, (long long)cfg.branching,
      (long long)problem->queryRows, (long long)problem->sequences,
      (long long)problem->keyRows, (long long)problem->kvHeads,
      (long long)(problem->queryHeads / problem->kvHeads),
      (long long)problem->headDim, compileSeconds,
      (*engine)->fromCache() ? " (cached)" : "", runSeconds,
      cfg.outPath.c_str());
  return 0;
}
