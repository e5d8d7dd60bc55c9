/* Calls the training entry points of docs/examples/sparse-prefill.mlir's
 * library as a C user would, on a machine without a GPU (CUDA's stub
 * driver): each result's sizes follow its pointer in the declared order,
 * and every refusal happens before the driver is touched. Prints one line
 * per case; the lit test checks them. */
#include "libsparse-prefill.h"

#include <stdio.h>

static char error[256];

static void show(const char *what, int status) {
  printf("%s: %d %s\n", what, status, status ? error : "");
}

int main(void) {
  PisaCall call = {0, 0, 0, error, sizeof error};
  const void *q = (const void *)0x1000000, *k = (const void *)0x2000000,
             *v = (const void *)0x3000000;
  void *o = (void *)0x4000000, *lse = (void *)0x5000000;
  int32_t *sel = (int32_t *)0x6000000;
  /* Tensors 16 MiB apart: none overlaps another (dq is 16 MiB). */
  const void *go = (const void *)0xa000000;
  void *dq = (void *)0xb000000, *dk = (void *)0xc000000, *dv = (void *)0xd000000;
  /* B = 2, N = Nq = 256: o [2, 16, 256, 128], lse [2, 16, 256], selection
   * [2, 1, 256, 8]. */
  show("forward lse size",
       pisa_sparse_prefill_forward(&call, q, 2, 256, k, 2, 256, v, 2, 256, 0,
                                   o, 2, 256, lse, 2, 255, sel, 2, 256));
  show("forward selection size",
       pisa_sparse_prefill_forward(&call, q, 2, 256, k, 2, 256, v, 2, 256, 0,
                                   o, 2, 256, lse, 2, 256, sel, 1, 256));
  show("forward null lse",
       pisa_sparse_prefill_forward(&call, q, 2, 256, k, 2, 256, v, 2, 256, 0,
                                   o, 2, 256, 0, 2, 256, sel, 2, 256));
  show("forward", pisa_sparse_prefill_forward(&call, q, 2, 256, k, 2, 256, v,
                                              2, 256, 0, o, 2, 256, lse, 2,
                                              256, sel, 2, 256));
  show("backward dk size",
       pisa_sparse_prefill_backward(&call, q, 2, 256, k, 2, 256, v, 2, 256, 0,
                                    sel, 2, 256, o, 2, 256, lse, 2, 256, go, 2,
                                    256, dq, 2, 256, dk, 2, 128, dv, 2, 256));
  show("backward dv batch",
       pisa_sparse_prefill_backward(&call, q, 2, 256, k, 2, 256, v, 2, 256, 0,
                                    sel, 2, 256, o, 2, 256, lse, 2, 256, go, 2,
                                    256, dq, 2, 256, dk, 2, 256, dv, 1, 256));
  show("backward dO rows",
       pisa_sparse_prefill_backward(&call, q, 2, 256, k, 2, 256, v, 2, 256, 0,
                                    sel, 2, 256, o, 2, 256, lse, 2, 256, go, 2,
                                    128, dq, 2, 256, dk, 2, 256, dv, 2, 256));
  show("backward misaligned dq",
       pisa_sparse_prefill_backward(&call, q, 2, 256, k, 2, 256, v, 2, 256, 0,
                                    sel, 2, 256, o, 2, 256, lse, 2, 256, go, 2,
                                    256, (char *)dq + 2, 2, 256, dk, 2, 256,
                                    dv, 2, 256));
  show("backward dk over dq",
       pisa_sparse_prefill_backward(&call, q, 2, 256, k, 2, 256, v, 2, 256, 0,
                                    sel, 2, 256, o, 2, 256, lse, 2, 256, go, 2,
                                    256, dq, 2, 256, (char *)dq + 4096, 2, 256,
                                    dv, 2, 256));
  show("backward dq over q",
       pisa_sparse_prefill_backward(&call, q, 2, 256, k, 2, 256, v, 2, 256, 0,
                                    sel, 2, 256, o, 2, 256, lse, 2, 256, go, 2,
                                    256, (void *)q, 2, 256, dk, 2, 256, dv, 2,
                                    256));
  show("backward", pisa_sparse_prefill_backward(
                       &call, q, 2, 256, k, 2, 256, v, 2, 256, 0, sel, 2, 256,
                       o, 2, 256, lse, 2, 256, go, 2, 256, dq, 2, 256, dk, 2,
                       256, dv, 2, 256));
  return 0;
}
