// Uses the installed pisa: registers its dialects and passes, parses a
// selection and runs --pisa-select-schedule (test/Tools/install.test).
#include "pisa/InitAllDialects.h"
#include "pisa/InitAllPasses.h"
#include "pisa/Version.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

static const char *kProgram = R"mlir(
func.func @select(%q: tensor<1x16x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>)
    -> tensor<1x1x4096x8xi32> {
  %off = arith.constant 0 : index
  %p = pisa.pyramid_build %k block_size = 64 branching = 2
      : tensor<1x1x4096x128xbf16> -> tensor<1x1x127x128xf32>
  %s = pisa.hier_topk %q, %k, %p, %off topk = 8 block_size = 64 branching = 2
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>,
        tensor<1x1x127x128xf32> -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}
)mlir";

int main() {
  mlir::DialectRegistry registry;
  mlir::pisa::registerAllDialects(registry);
  mlir::pisa::registerAllPasses();
  mlir::MLIRContext ctx(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kProgram, &ctx);
  if (!module)
    return 1;
  mlir::PassManager pm(&ctx);
  if (mlir::failed(mlir::parsePassPipeline("pisa-select-schedule", pm)) ||
      mlir::failed(pm.run(*module)))
    return 1;
  llvm::outs() << "pisa " << PISA_VERSION_STRING << "\n";
  module->print(llvm::outs());
  return 0;
}
