//===- CallState.h - a call's thread-local state in the runtime -*- C++ -*-===//
//
// What the two halves of the runtime share (CallChecks.cpp: the checks
// around an entry point call; CudaRuntime.cpp: the mgpu* ABI the host
// code calls): the calling thread's call (its stream, workspace and first
// failure) and the way failures are recorded, never printed. Internal to
// the runtime; an AOT library exports none of it.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_RUNTIME_CALLSTATE_H
#define PISA_LIB_RUNTIME_CALLSTATE_H

#include <cuda.h>

#include <stddef.h>
#include <stdint.h>

namespace pisa::runtime {

struct CallState {
  bool active = false;
  CUstream stream = nullptr;
  uintptr_t cursor = 0, limit = 0; ///< the workspace still free
  bool failed = false;
  bool driverFailed = false; ///< the failure was a driver call's
  char prefix[96] = "";      ///< "pisa_<entry>: ", naming the call
  char *error = nullptr;     ///< the caller's message buffer
  size_t errorBytes = 0;
};

/// This thread's call.
extern thread_local CallState call;

/// A thread's last message (pisa_runtime_last_error).
struct ErrorSlot {
  char text[512];
  bool have;
};
/// The calling thread's slot, shared by every AOT library of the process
/// that the dynamic linker can see (CallChecks.cpp).
ErrorSlot *errorSlot();

/// Records the first failure of this thread's call (or outside a call) and
/// copies it to the caller's buffer. Nothing is printed.
void fail(const char *format, ...) __attribute__((format(printf, 1, 2)));

/// Records a failed driver call; true when `result` is success.
bool check(CUresult result, const char *what);
#define PISA_CHECK(call) ::pisa::runtime::check((call), #call)

/// The calling thread's current context; never replaced or created here.
/// Failures name `function` (the entry point) when given.
bool currentContext(CUcontext *context, const char *function = nullptr);

/// Refuses the call of entry `function`: "pisa_<function>: <detail>" as
/// its message; returns `status`.
int reject(int status, const char *function, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

} // namespace pisa::runtime

#endif // PISA_LIB_RUNTIME_CALLSTATE_H
