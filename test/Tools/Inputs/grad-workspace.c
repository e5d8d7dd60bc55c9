/* The workspace query of the backward (grad-workspace.mlir), whose query
 * bits grow with N x Nq: sizes whose bytes pass 2^63 - 1 while every
 * tensor stays within 2^46 elements give SIZE_MAX, never a wrapped
 * product. Runs without a GPU. */
#include "libgw.h"

#include <stdint.h>
#include <stdio.h>

static size_t batched(int64_t b, int64_t nq, int64_t n) {
  return pisa_grad_workspace_size(b, nq, b, n, b, n, b, nq, b, nq, b, nq, b,
                                  nq);
}

static size_t packed(int64_t tq, int64_t tk, int64_t seqs) {
  return pisa_grad_packed_workspace_size(tq, tk, tk, tq, seqs + 1, seqs + 1,
                                         tq, tq, tq);
}

int main(void) {
  size_t small = batched(1, 4096, 4096), large = batched(1, 1 << 20, 1 << 20);
  printf("batched: grows %d, 4K below 1 GiB %d\n", large > small,
         small < ((size_t)1 << 30));
  /* N = Nq = 2^40 (q and k 2^45 elements): about 2^74 bytes of bits. */
  int64_t huge = (int64_t)1 << 40;
  printf("batched past 2^63 bytes: %zu\n", batched(1, huge, huge));
  size_t p4k = packed(4096, 4096, 4);
  printf("packed: 4 x 1K below 1 GiB %d\n", p4k > 0 && p4k < ((size_t)1 << 30));
  printf("packed past 2^63 bytes: %zu\n", packed(huge, huge, 1));
  return 0;
}
