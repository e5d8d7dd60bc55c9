/* Calls docs/examples/select-any-length.mlir's library as a C user would,
 * on a machine without a GPU (CUDA's stub driver): the workspace query and
 * every refusal happen before the driver is touched. Prints one line per
 * case; the lit test checks them. */
#include "libany.h"

#include <stdio.h>

static char error[256];

static void show(const char *what, int status) {
  printf("%s: %d %s\n", what, status, status ? error : "");
}

int main(void) {
  /* Grows with N and B, never depends on pointers; 256-aligned pieces. */
  size_t w4k = pisa_select_workspace_size(1, 4096, 1, 4096);
  size_t w1m = pisa_select_workspace_size(1, 1 << 20, 1, 1 << 20);
  size_t w2x = pisa_select_workspace_size(2, 4096, 2, 4096);
  printf("workspace 4K %zu, 1M %zu, B=2 %zu\n", w4k, w1m, w2x);
  printf("workspace grows: %d %d, aligned: %d\n", w1m > w4k, w2x > w4k,
         (int)(w4k % 256 == 0));
  printf("workspace of a negative size: %zu\n",
         pisa_select_workspace_size(1, -1, 1, 4096));
  /* Sizes past 2^46 elements: SIZE_MAX, never a wrapped product. */
  printf("workspace of huge sizes: %zu %zu\n",
         pisa_select_workspace_size(1, INT64_MAX, 1, INT64_MAX),
         pisa_select_workspace_size(1, (int64_t)1 << 40, 1, (int64_t)1 << 40));

  PisaCall call = {0, 0, 0, error, sizeof error};
  /* Fake device pointers 64 GiB apart: no tensor overlaps another. */
  int32_t *out = (int32_t *)0x2000000000;
  const void *q = (const void *)0x1000000000, *k = (const void *)0x3000000000;
  show("batch mismatch",
       pisa_select(&call, q, 1, 4096, k, 2, 4096, 0, out, 1, 4096));
  show("more queries than keys",
       pisa_select(&call, q, 1, 4096, k, 1, 100, 0, out, 1, 4096));
  show("offset past the keys",
       pisa_select(&call, q, 1, 10, k, 1, 4096, 4087, out, 1, 10));
  show("result size", pisa_select(&call, q, 1, 10, k, 1, 4096, 0, out, 1, 9));
  show("negative size",
       pisa_select(&call, q, 1, 10, k, 1, -5, 0, out, 1, 10));
  show("null keys", pisa_select(&call, q, 1, 10, 0, 1, 4096, 0, out, 1, 10));
  show("grid limit",
       pisa_select(&call, q, 70000, 1, k, 70000, 64, 0, out, 70000, 1));
  /* Valid sizes: refused only for the missing workspace. */
  show("no workspace",
       pisa_select(&call, q, 1, 1, k, 1, 4096, 4095, out, 1, 1));
  return 0;
}
