/* Two AOT libraries in one program: their headers include together (each
 * has its own guard) and pisa_runtime_last_error, whichever library's
 * definition the program binds, reports the last failure of either. */
#include "libdecode.h"
#include "libprefill.h"

#include <stdio.h>

int main(void) {
  int s1 = pisa_prefill_select(NULL, NULL, NULL, NULL);
  const char *e1 = pisa_runtime_last_error();
  printf("prefill: %d %s\n", s1, e1 ? e1 : "(null)");
  pisa_runtime_clear_error();
  int s2 = pisa_decode_select(NULL, NULL, NULL, NULL, 0, NULL);
  const char *e2 = pisa_runtime_last_error();
  printf("decode: %d %s\n", s2, e2 ? e2 : "(null)");
  pisa_runtime_clear_error();
  const char *e3 = pisa_runtime_last_error();
  printf("cleared: %s\n", e3 ? e3 : "(null)");
  return 0;
}
