/* Calls docs/examples/lse-score.mlir's library as a C user would, on a
 * machine without a GPU (CUDA's stub driver): every refusal happens before
 * the driver is touched. Prints one line per case; the lit test checks
 * them. */
#include "liblse.h"

#include <stdio.h>

static char error[256];

static void show(const char *what, int status) {
  printf("%s: %d %s\n", what, status, status ? error : "");
}

int main(void) {
  PisaCall call = {0, 0, 0, error, sizeof error};
  /* Fake device pointers 64 GiB apart: no tensor overlaps another. */
  const void *q = (const void *)0x1000000000, *k = (const void *)0x3000000000;
  const void *nodes = (const void *)0x5000000000;
  void *u = (void *)0x7000000000;
  printf("workspace: %zu\n", pisa_leaf_scores_workspace_size(2, 10, 2, 100, 2, 10, 5));
  show("negative offset", pisa_leaf_scores(&call, q, 2, 10, k, 2, 100, nodes,
                                           2, 10, 5, -1, u, 2, 10, 5));
  show("offset past i32", pisa_leaf_scores(&call, q, 2, 10, k, 2, 100, nodes,
                                           2, 10, 5, (int64_t)1 << 31, u, 2,
                                           10, 5));
  show("batch mismatch", pisa_leaf_scores(&call, q, 2, 10, k, 1, 100, nodes,
                                          2, 10, 5, 0, u, 2, 10, 5));
  show("candidate rows", pisa_leaf_scores(&call, q, 2, 10, k, 2, 100, nodes,
                                          2, 9, 5, 0, u, 2, 10, 5));
  show("result size", pisa_level2_scores(&call, q, 2, 10, k, 2, 100, nodes,
                                         2, 10, 5, 0, u, 2, 10, 4));
  show("grid limit", pisa_leaf_scores(&call, q, 70000, 1, k, 70000, 64, nodes,
                                      70000, 1, 1, 0, u, 70000, 1, 1));
  show("null candidates", pisa_leaf_scores(&call, q, 2, 10, k, 2, 100, 0, 2,
                                           10, 5, 0, u, 2, 10, 5));
  return 0;
}
