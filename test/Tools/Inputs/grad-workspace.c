/* The workspace query of the backward (grad-workspace.mlir): its scratch
 * (the query lists, the segments' sums) grows linearly with N and Nq, and
 * sizes whose bytes pass 2^63 - 1 give SIZE_MAX, never a wrapped product.
 * Runs without a GPU. */
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
  int64_t m = (int64_t)1 << 20;
  size_t oneM = batched(1, m, m), fourM = batched(1, 4 * m, 4 * m);
  /* Linear: 4x the tokens take at most 5x the bytes (the query bits they
   * replace took 16x: 2.1 GB at 1M). */
  printf("batched: 1M below 1 GiB %d, 4M at most 5x %d\n",
         oneM > 0 && oneM < ((size_t)1 << 30), fourM <= 5 * oneM);
  /* N = Nq = 2^60: about 2^68 bytes. */
  int64_t huge = (int64_t)1 << 60;
  printf("batched past 2^63 bytes: %zu\n", batched(1, huge, huge));
  /* 4M packed tokens in 1024 sequences of 4K: linear in the batch's
   * tokens too. */
  size_t p1 = packed(m, m, 256), p4 = packed(4 * m, 4 * m, 1024);
  printf("packed: 1M below 1 GiB %d, 4M at most 5x %d\n",
         p1 > 0 && p1 < ((size_t)1 << 30), p4 <= 5 * p1);
  printf("packed past 2^63 bytes: %zu\n", packed(huge, huge, 1));
  return 0;
}
