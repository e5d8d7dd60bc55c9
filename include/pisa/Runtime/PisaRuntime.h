/*===- PisaRuntime.h - the C interface of pisa's AOT libraries -----*- C
 * -*-===//
 *
 * An AOT library built by pisa-compile exports, for each public function F
 * of its program:
 *
 *   size_t pisa_F_workspace_size(void);
 *   int pisa_F(const PisaCall *call, const void *arg0, ..., int64_t argI,
 *              ..., void *result);   (one pointer per result, in order)
 *
 * declared with their shapes in the library's generated header (NAME.h)
 * and described in its manifest (NAME.json). Every tensor is a pointer to
 * device memory in C order, 16-byte aligned; the caller owns all memory:
 * the inputs, the results (written in place; none may share memory with
 * another tensor of the call) and the workspace. A call
 * enqueues its kernels on call->stream and returns: no allocation, no
 * host synchronisation, no printing, so it can be captured in a CUDA
 * graph. It runs in the caller's current CUDA context (any device) and
 * is safe from several threads at once on different streams, each call
 * with its own workspace.
 *
 * Plain C, no MLIR or CUDA header needed.
 *
 *===----------------------------------------------------------------------===*/

#ifndef PISA_RUNTIME_PISARUNTIME_H
#define PISA_RUNTIME_PISARUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status of a call. On anything but PISA_OK the message (call->error, and
 * pisa_runtime_last_error() on the calling thread) says what and which
 * argument. Argument and workspace errors are found before anything is
 * enqueued: no kernel runs and nothing is written. */
enum PisaStatus {
  PISA_OK = 0,
  PISA_ERROR_INVALID_ARGUMENT = 1, /* null, misaligned, out of range */
  PISA_ERROR_WORKSPACE = 2,        /* missing, too small or misaligned */
  PISA_ERROR_CUDA = 3              /* a driver call failed */
};

typedef struct PisaCall {
  /* A CUstream of the caller's current context; NULL is the legacy default
   * stream. The call is ordered after the work enqueued on it before. */
  void *stream;
  /* Device memory of at least pisa_F_workspace_size() bytes, aligned to
   * 256 bytes; the library's scratch for this call. It may be reused as
   * soon as the stream has passed the call. NULL when the size is 0. */
  void *workspace;
  size_t workspace_bytes;
  /* Optional: receives a NUL-terminated message when the call fails. */
  char *error;
  size_t error_bytes;
} PisaCall;

/* The message of this thread's last failed call, or NULL. */
const char *pisa_runtime_last_error(void);
void pisa_runtime_clear_error(void);

/* The library's manifest: the JSON text of NAME.json, compiled into the
 * library so that it always describes this build (pisa.aot reads it). With
 * several libraries linked into one program the name resolves to one of
 * them: look it up with dlsym on a library's own handle. */
const char *pisa_runtime_manifest(void);

#ifdef __cplusplus
}
#endif

#endif /* PISA_RUNTIME_PISARUNTIME_H */
