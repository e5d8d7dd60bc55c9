//===- KernelLoweringTest.cpp - Every pisa op says how it becomes kernels --===//
//
// Once registerAllDialects has run, each user-level op of the dialect
// implements KernelLoweringOpInterface (its GPU limits, decomposition and
// AOT entry facts) and no kernel-level op does: an op added without a
// model fails here rather than at "has no GPU lowering". The facts a
// hier_topk and an append give pisa-compile are the contract's.
//
//===----------------------------------------------------------------------===//

#include "pisa/IR/PisaDialect.h"
#include "pisa/IR/PisaInterfaces.h"
#include "pisa/InitAllDialects.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

MLIRContext &context() {
  static MLIRContext *ctx = [] {
    DialectRegistry registry;
    pisa::registerAllDialects(registry);
    auto *c = new MLIRContext(registry);
    c->loadAllAvailableDialects();
    return c;
  }();
  return *ctx;
}

TEST(KernelLowering, EveryUserLevelOpHasAModel) {
  int userOps = 0;
  for (RegisteredOperationName name :
       context().getRegisteredOperations()) {
    if (name.getDialectNamespace() != "pisa")
      continue;
    SCOPED_TRACE(name.getStringRef().str());
    const bool kernelLevel = name.getStringRef().starts_with("pisa.kernel.");
    EXPECT_EQ(name.hasInterface<pisa::KernelLoweringOpInterface>(),
              !kernelLevel);
    userOps += !kernelLevel;
  }
  // pyramid_build(_varlen), lse_score, hier_topk(_varlen), pyramid_append,
  // decode_select, sparse_attention(_varlen),
  // sparse_attention_grad(_varlen).
  EXPECT_EQ(userOps, 11);
}

/// The facts of the first op implementing the interface in `text`.
pisa::EntryFacts factsOf(const char *text, OwningOpRef<ModuleOp> &module) {
  module = parseSourceString<ModuleOp>(text, &context());
  EXPECT_TRUE(module);
  pisa::EntryFacts facts;
  if (!module)
    return facts;
  module->walk([&](pisa::KernelLoweringOpInterface op) {
    op.describeEntry(facts);
    return WalkResult::interrupt();
  });
  return facts;
}

TEST(KernelLowering, SelectionBoundsItsOffsetAndNamesItsLayout) {
  OwningOpRef<ModuleOp> module;
  pisa::EntryFacts facts = factsOf(R"mlir(
    func.func @f(%q: tensor<1x30x4x16xf16>, %k: tensor<1x100x2x16xf16>,
                 %p: tensor<1x2x14x16xf32>, %off: index) -> tensor<1x30x2x4xi32> {
      %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 16
          branching = 2 {token_major}
          : tensor<1x30x4x16xf16>, tensor<1x100x2x16xf16>, tensor<1x2x14x16xf32>
          -> tensor<1x30x2x4xi32>
      return %s : tensor<1x30x2x4xi32>
    })mlir",
                                   module);
  ASSERT_EQ(facts.ranges.size(), 1u);
  auto func = cast<func::FuncOp>(module->getBody()->front());
  EXPECT_EQ(facts.ranges[0].value, func.getArgument(3));
  // Token-major: N = 100 and Nq = 30 are dimension 1.
  EXPECT_EQ(facts.ranges[0].lowest, 0);
  EXPECT_EQ(facts.ranges[0].highest, 70);
  ASSERT_EQ(facts.layouts.size(), 1u);
  EXPECT_EQ(facts.layouts[0].second, "bthk");
  EXPECT_TRUE(facts.roles.empty());
}

TEST(KernelLowering, AppendUpdatesItsCacheAndChecksItsBounds) {
  OwningOpRef<ModuleOp> module;
  pisa::EntryFacts facts = factsOf(R"mlir(
    func.func @f(%k: tensor<2x1x64x16xf16>, %from: tensor<2xi32>,
                 %to: tensor<2xi32>, %p: tensor<2x1x7x16xf32>) -> tensor<2x1x7x16xf32> {
      %q = pisa.pyramid_append %k, %p, %from, %to block_size = 16 branching = 2
          : tensor<2x1x64x16xf16>, tensor<2x1x7x16xf32>, tensor<2xi32>, tensor<2xi32>
          -> tensor<2x1x7x16xf32>
      return %q : tensor<2x1x7x16xf32>
    })mlir",
                                   module);
  auto func = cast<func::FuncOp>(module->getBody()->front());
  ASSERT_EQ(facts.updatedInPlace.size(), 1u);
  EXPECT_EQ(facts.updatedInPlace[0], func.getArgument(3));
  ASSERT_EQ(facts.roles.size(), 2u);
  EXPECT_EQ(facts.roles[0].role, "from");
  EXPECT_EQ(facts.roles[0].value, func.getArgument(1));
  EXPECT_EQ(facts.roles[0].capacity, 64);
  EXPECT_EQ(facts.roles[1].role, "to");
  EXPECT_TRUE(facts.ranges.empty());
}

} // namespace
