/* Reads text-line images through ocrt's C API and prints path, text and confidence, one line
 * each, tab-separated. Built with pkg-config against an installed ocrt (docs/library.md):
 *   cc -std=c99 read_line.c $(pkg-config --cflags --libs ocrt) -o read_line_c
 *   read_line_c MODEL IMAGE... */
#include <stdio.h>

#include "capi/ocrt.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL IMAGE...\n", argv[0]);
    return 2;
  }
  ocrt_model* model = ocrt_open(argv[1], "cpu", 0);
  if (!model) {
    fprintf(stderr, "%s\n", ocrt_last_error());
    return 2;
  }
  /* One call for all the lines: they are batched by width, as ocrt-infer does. */
  ocrt_result* result = ocrt_recognize_files(model, (const char* const*)(argv + 2), (size_t)(argc - 2));
  int failed = result == NULL;
  for (size_t i = 0; i < ocrt_result_count(result); ++i) {
    const char* error = ocrt_result_error(result, i);
    if (error) {
      fprintf(stderr, "%s\n", error);
      failed = 1;
    }
    printf("%s\t%s\t%.4f\n", argv[2 + i], ocrt_result_text(result, i), ocrt_result_confidence(result, i));
  }
  if (!result) fprintf(stderr, "%s\n", ocrt_last_error());
  ocrt_result_free(result);
  ocrt_close(model);
  return failed;
}
