//===- InitAllPasses.h - Passes and pipelines pisa uses ---------*- C++ -*-===//
//
// Registers pisa's passes and pipelines, and the upstream passes they are
// built from, so that any pipeline step can be replayed with pisa-opt.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_INITALLPASSES_H
#define PISA_INITALLPASSES_H

namespace mlir::pisa {

void registerAllPasses();

} // namespace mlir::pisa

#endif // PISA_INITALLPASSES_H
