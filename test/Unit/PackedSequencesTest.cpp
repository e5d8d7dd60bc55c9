//===- PackedSequencesTest.cpp - The varlen kernels' index math, on the CPU
//-===//
//
// The GPU kernels of a packed varlen batch find their sequence with the IR
// of PackedSequences.h. That IR is plain arith/scf/memref, so it is built
// here into small functions, lowered with pisa-cpu-pipeline, JIT-compiled
// and checked on random cu_seqlens against the contract's arithmetic: the
// sequence of every query row, the pyramid's node slots (every node of
// every level of every sequence gets exactly one slot inside the grid) and
// the batch's rules. A machine without a GPU runs it.
//
//===----------------------------------------------------------------------===//

#include "Selection/PackedSequences.h"

#include "../Common/LoopBuilders.h"

#include "pisa/InitAllDialects.h"
#include "pisa/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

using namespace mlir;
using namespace mlir::pisa::detail;

namespace {

constexpr int64_t kBlock = 8;  // C
constexpr int64_t kFanout = 2; // g

using Memref1D = StridedMemRefType<int32_t, 1>;

Memref1D view(std::vector<int32_t> &v) {
  return {v.data(), v.data(), 0, {int64_t(v.size())}, {1}};
}

/// The three functions under test, compiled once:
///   sequence_of_row(cu, row) -> index          (findSequence on cu)
///   slot_sequence / slot_node(cu, slot, span)  (a pyramid block's node)
///   rules(cu_q, cu_k, Tq, Tk) -> i1            (batchRulesHold)
class PackedSequencesTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    DialectRegistry registry;
    mlir::pisa::registerAllDialects(registry);
    registerBuiltinDialectTranslation(registry);
    registerLLVMDialectTranslation(registry);
    ctx = new MLIRContext(registry);
    ctx->loadAllAvailableDialects();
    OwningOpRef<ModuleOp> module = build();
    PassManager pm(ctx);
    mlir::pisa::buildPisaCPUPipeline(pm);
    ASSERT_TRUE(succeeded(pm.run(*module)));
    auto created = ExecutionEngine::create(*module);
    ASSERT_TRUE(bool(created));
    engine = created->release();
  }
  static void TearDownTestSuite() {
    delete engine;
    delete ctx;
  }

  static OwningOpRef<ModuleOp> build() {
    OpBuilder ob(ctx);
    Location loc = ob.getUnknownLoc();
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    ob.setInsertionPointToEnd(module->getBody());
    Type index = ob.getIndexType();
    auto cuType = MemRefType::get({ShapedType::kDynamic}, ob.getI32Type());
    auto define = [&](StringRef name, TypeRange inputs, TypeRange results,
                      llvm::function_ref<SmallVector<Value>(
                          ImplicitLocOpBuilder &, ValueRange)>
                          body) {
      OpBuilder::InsertionGuard guard(ob);
      auto fn = func::FuncOp::create(ob, loc, name,
                                     ob.getFunctionType(inputs, results));
      fn->setAttr("llvm.emit_c_interface", ob.getUnitAttr());
      ImplicitLocOpBuilder b(loc, ob);
      b.setInsertionPointToStart(fn.addEntryBlock());
      func::ReturnOp::create(b, body(b, fn.getArguments()));
    };
    define("sequence_of_row", {cuType, index}, {index},
           [](ImplicitLocOpBuilder &b, ValueRange a) -> SmallVector<Value> {
             Value numSeqs =
                 arith::SubIOp::create(b, dimOf(b, a[0], 0), indexConst(b, 1));
             return {findSequence(b, numSeqs, a[1],
                                  [&](ImplicitLocOpBuilder &lb, Value s) {
                                    return cuEntry(lb, a[0], s);
                                  })};
           });
    // A pyramid block's sequence and node (one function each: the C
    // interface returns one value).
    for (bool node : {false, true})
      define(
          node ? "slot_node" : "slot_sequence", {cuType, index, index}, {index},
          [node](ImplicitLocOpBuilder &b, ValueRange a) -> SmallVector<Value> {
            Value numSeqs =
                arith::SubIOp::create(b, dimOf(b, a[0], 0), indexConst(b, 1));
            auto first = [&](ImplicitLocOpBuilder &lb, Value s) {
              return firstNodeSlot(lb, cuEntry(lb, a[0], s), s, kBlock, a[2]);
            };
            Value seq = findSequence(b, numSeqs, a[1], first);
            if (!node)
              return {seq};
            return {arith::SubIOp::create(b, a[1], first(b, seq))};
          });
    define("rules", {cuType, cuType, index, index}, {ob.getI1Type()},
           [](ImplicitLocOpBuilder &b, ValueRange a) -> SmallVector<Value> {
             return {batchRulesHold(b, a[1], a[3], a[0], a[2])};
           });
    // The pyramid's form: cu_k alone.
    define("key_rules", {cuType, index}, {ob.getI1Type()},
           [](ImplicitLocOpBuilder &b, ValueRange a) -> SmallVector<Value> {
             return {batchRulesHold(b, a[0], a[1])};
           });
    return module;
  }

  static int64_t sequenceOfRow(std::vector<int32_t> &cu, int64_t row) {
    Memref1D m = view(cu);
    int64_t out = -1;
    llvm::Error e = engine->invoke("sequence_of_row", &m, row,
                                   ExecutionEngine::result(out));
    EXPECT_FALSE(bool(e));
    llvm::consumeError(std::move(e));
    return out;
  }

  static std::pair<int64_t, int64_t> nodeSlot(std::vector<int32_t> &cu,
                                              int64_t slot, int64_t span) {
    Memref1D m = view(cu);
    int64_t seq = -1, node = -1;
    llvm::Error e = engine->invoke("slot_sequence", &m, slot, span,
                                   ExecutionEngine::result(seq));
    EXPECT_FALSE(bool(e));
    llvm::consumeError(std::move(e));
    e = engine->invoke("slot_node", &m, slot, span,
                       ExecutionEngine::result(node));
    EXPECT_FALSE(bool(e));
    llvm::consumeError(std::move(e));
    return {seq, node};
  }

  static bool rules(std::vector<int32_t> &cuq, std::vector<int32_t> &cuk,
                    int64_t tq, int64_t tk) {
    Memref1D mq = view(cuq), mk = view(cuk);
    bool out = false;
    llvm::Error e =
        engine->invoke("rules", &mq, &mk, tq, tk, ExecutionEngine::result(out));
    EXPECT_FALSE(bool(e));
    llvm::consumeError(std::move(e));
    return out;
  }

  static bool keyRules(std::vector<int32_t> &cuk, int64_t tk) {
    Memref1D mk = view(cuk);
    bool out = false;
    llvm::Error e =
        engine->invoke("key_rules", &mk, tk, ExecutionEngine::result(out));
    EXPECT_FALSE(bool(e));
    llvm::consumeError(std::move(e));
    return out;
  }

  static MLIRContext *ctx;
  static ExecutionEngine *engine;
};

MLIRContext *PackedSequencesTest::ctx = nullptr;
ExecutionEngine *PackedSequencesTest::engine = nullptr;

/// Random lengths (empty ones and long ones included) as cu_seqlens.
std::vector<int32_t> drawCu(std::mt19937 &rng, int64_t sequences,
                            int64_t maxLength) {
  std::vector<int32_t> cu{0};
  std::uniform_int_distribution<int64_t> length(0, maxLength);
  std::uniform_int_distribution<int> kind(0, 9);
  for (int64_t s = 0; s < sequences; ++s) {
    int k = kind(rng);
    int64_t n = k == 0 ? 0 : k == 1 ? 1 : k == 2 ? kBlock : length(rng);
    cu.push_back(int32_t(cu.back() + n));
  }
  return cu;
}

int64_t ceilDivide(int64_t a, int64_t b) { return (a + b - 1) / b; }

TEST_F(PackedSequencesTest, EveryQueryRowFindsItsSequence) {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<int32_t> cu = drawCu(rng, 1 + trial % 9, trial % 3 ? 40 : 3);
    for (int64_t row = 0; row < cu.back(); ++row) {
      int64_t b = sequenceOfRow(cu, row);
      ASSERT_GE(b, 0);
      ASSERT_LT(b, int64_t(cu.size()) - 1);
      EXPECT_LE(cu[b], row) << "trial " << trial << " row " << row;
      EXPECT_LT(row, cu[b + 1]) << "trial " << trial << " row " << row;
    }
  }
}

TEST_F(PackedSequencesTest, PyramidSlotsCoverEveryNodeOnce) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<int32_t> cu = drawCu(rng, 1 + trial % 7, 70);
    const int64_t numSeqs = int64_t(cu.size()) - 1, tk = cu.back();
    // Levels 1 .. L(Tk): spans 1, g, g^2, ...
    int64_t levels = 1;
    for (int64_t span = 1; span < ceilDivide(tk, kBlock); span *= kFanout)
      ++levels;
    int64_t span = 1;
    for (int64_t level = 1; level <= levels; ++level, span *= kFanout) {
      const int64_t slots = (tk / kBlock) / span + numSeqs;
      std::vector<std::vector<int>> hits(numSeqs);
      for (int64_t s = 0; s < numSeqs; ++s) {
        int64_t leaves = ceilDivide(cu[s + 1] - cu[s], kBlock);
        // The level exists for the sequence when its child level has more
        // than one node (level 1 whenever there are leaves).
        bool exists =
            level == 1 ? leaves > 0 : ceilDivide(leaves, span / kFanout) > 1;
        hits[s].assign(exists ? ceilDivide(leaves, span) : 0, 0);
      }
      for (int64_t slot = 0; slot < slots; ++slot) {
        auto [seq, node] = nodeSlot(cu, slot, span);
        ASSERT_GE(seq, 0);
        ASSERT_LT(seq, numSeqs);
        if (node >= 0 && node < int64_t(hits[seq].size()))
          ++hits[seq][node];
      }
      for (int64_t s = 0; s < numSeqs; ++s)
        for (size_t i = 0; i < hits[s].size(); ++i)
          EXPECT_EQ(hits[s][i], 1) << "trial " << trial << " level " << level
                                   << " sequence " << s << " node " << i;
    }
  }
}

TEST_F(PackedSequencesTest, BatchRulesMatchTheContract) {
  std::mt19937 rng(14);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int32_t> cuk = drawCu(rng, 1 + trial % 6, 30);
    std::vector<int32_t> cuq{0};
    for (size_t s = 0; s + 1 < cuk.size(); ++s) {
      int64_t n = cuk[s + 1] - cuk[s];
      cuq.push_back(int32_t(cuq.back() +
                            std::uniform_int_distribution<int64_t>(0, n)(rng)));
    }
    int64_t tq = cuq.back(), tk = cuk.back();
    ASSERT_TRUE(rules(cuq, cuk, tq, tk)) << "trial " << trial;
    ASSERT_TRUE(keyRules(cuk, tk)) << "trial " << trial;
    // Break one rule: a first entry, a last entry, a decrease, Nq_b > N_b.
    std::uniform_int_distribution<size_t> at(0, cuk.size() - 1);
    std::vector<int32_t> q = cuq, k = cuk;
    switch (trial % 5) {
    case 0:
      k[0] = 1;
      break;
    case 1:
      q[0] = 1;
      break;
    case 2:
      k.back() -= 1;
      break;
    case 3:
      if (k.size() < 3)
        continue;
      k[1] = k.back() + 1; // above cu_k[2]
      break;
    case 4: {
      size_t b = at(rng) % (k.size() - 1);
      q[b + 1] = q[b] + (k[b + 1] - k[b]) + 1;
      for (size_t j = b + 2; j < q.size(); ++j)
        q[j] = std::max(q[j], q[b + 1]);
      tq = q.back();
      break;
    }
    }
    EXPECT_FALSE(rules(q, k, tq, tk))
        << "trial " << trial << " case " << trial % 5;
    if (k != cuk) // the keys' own rules break too
      EXPECT_FALSE(keyRules(k, tk))
          << "trial " << trial << " case " << trial % 5;
  }
}

} // namespace
