/* Prints the manifest the library carries (pisa_runtime_manifest). */
#include "libprefill.h"

#include <stdio.h>

int main(void) {
  fputs(pisa_runtime_manifest(), stdout);
  return 0;
}
