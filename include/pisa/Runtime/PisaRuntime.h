/*===- PisaRuntime.h - pisa's CUDA runtime, C API ------------------*- C -*-===//
 *
 * Host code that MLIR's gpu-to-llvm lowering produces calls the mgpu*
 * functions (the ABI of MLIR's CUDA runtime wrappers); pisa's runtime
 * implements them over the CUDA driver API. This header is the part meant
 * for users of an AOT library built by pisa-compile: error reporting and
 * the stream the library's kernels run on. Plain C, no MLIR dependency.
 *
 *===----------------------------------------------------------------------===*/

#ifndef PISA_RUNTIME_PISARUNTIME_H
#define PISA_RUNTIME_PISARUNTIME_H

#ifdef __cplusplus
extern "C" {
#endif

/* The first driver error since the last pisa_runtime_clear_error(), as
 * "cuLaunchKernel: CUDA_ERROR_INVALID_VALUE: invalid argument", or NULL. */
const char *pisa_runtime_last_error(void);
void pisa_runtime_clear_error(void);

/* Run the library's work on `stream` (a CUstream, e.g. PyTorch's current
 * stream); NULL, the default, is the legacy default stream. An entry point
 * returns once its work is enqueued there (stream-ordered, like a PyTorch
 * op or a cuBLAS call: it runs after the work the caller enqueued before
 * on that stream; read the result on that stream, or synchronize it
 * first). */
void pisa_runtime_set_stream(void *stream);

/* Frees a buffer the library allocated (an entry point's result), ordered
 * on the stream set by pisa_runtime_set_stream. */
void pisa_runtime_free(void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* PISA_RUNTIME_PISARUNTIME_H */
