//===- BufferizableOpInterfaceImpl.h - Bufferizing kernel ops ---*- C++ -*-===//
//
// One-shot bufferization of the kernel-level ops (destination-passing: each
// destination bufferizes in place into the buffer of its result).
//
//===----------------------------------------------------------------------===//

#ifndef PISA_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
#define PISA_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H

namespace mlir {
class DialectRegistry;
namespace pisa {
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);
} // namespace pisa
} // namespace mlir

#endif // PISA_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
