/* Calls docs/examples/varlen-select.mlir's library (a packed varlen batch)
 * as a C user would, on a machine without a GPU (CUDA's stub driver): the
 * workspace query and every refusal on sizes happen before the driver is
 * touched. Prints one line per case; the lit test checks them. */
#include "libvarlen.h"

#include <stdio.h>

static char error[256];

static void show(const char *what, int status) {
  printf("%s: %d %s\n", what, status, status ? error : "");
}

int main(void) {
  /* (Tq, Tk, B + 1, B + 1): grows with Tk and B, not with the lengths. */
  size_t w1 = pisa_select_varlen_workspace_size(4096, 4096, 2, 2);
  size_t w64 = pisa_select_varlen_workspace_size(64, 64 * 32768, 65, 65);
  size_t w0 = pisa_select_varlen_workspace_size(0, 0, 1, 1);
  printf("workspace 1x4K %zu, 64x32K %zu, empty %zu\n", w1, w64, w0);
  printf("workspace grows: %d, aligned: %d\n", w64 > w1, (int)(w1 % 256 == 0));

  PisaCall call = {0, 0, 0, error, sizeof error};
  /* Fake device pointers 64 GiB apart: no tensor overlaps another. */
  int32_t *out = (int32_t *)0x2000000000;
  const void *q = (const void *)0x1000000000, *k = (const void *)0x3000000000;
  const void *cuq = (const void *)0x4000000000, *cuk = (const void *)0x5000000000;
  show("different B",
       pisa_select_varlen(&call, q, 10, k, 100, cuq, 3, cuk, 4, out, 10));
  show("no sequence, query rows",
       pisa_select_varlen(&call, q, 10, k, 0, cuq, 1, cuk, 1, out, 10));
  show("no sequence, key rows",
       pisa_select_varlen(&call, q, 0, k, 100, cuq, 1, cuk, 1, out, 0));
  show("empty cu_seqlens",
       pisa_select_varlen(&call, q, 0, k, 0, cuq, 0, cuk, 0, out, 0));
  show("result size",
       pisa_select_varlen(&call, q, 10, k, 100, cuq, 3, cuk, 3, out, 9));
  show("negative size",
       pisa_select_varlen(&call, q, -1, k, 100, cuq, 3, cuk, 3, out, -1));
  show("null cu_seqlens",
       pisa_select_varlen(&call, q, 10, k, 100, 0, 3, cuk, 3, out, 10));
  /* Valid sizes: refused only for the missing workspace. */
  show("no workspace",
       pisa_select_varlen(&call, q, 10, k, 100, cuq, 3, cuk, 3, out, 10));
  /* The validating call refuses the same sizes before reading anything. */
  show("validate, different B",
       pisa_select_varlen_validate(&call, q, 10, k, 100, cuq, 3, cuk, 4, out,
                                   10));
  show("validate, no workspace",
       pisa_select_varlen_validate(&call, q, 10, k, 100, cuq, 3, cuk, 3, out,
                                   10));
  return 0;
}
