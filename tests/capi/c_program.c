/* The C API from a C program: compiled as C99 with -pedantic -Werror (tests/CMakeLists.txt), so
 * a C++-ism in capi/ocrt.h fails the build, and linked to libocrt.so, so a function that the
 * shared library does not export fails the link. Then it reads one line through the library
 * and checks the text, the calls that must fail, and a blank page in memory.
 *   ocrt_capi_c_test MODEL IMAGE EXPECTED_TEXT */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "capi/ocrt.h"

static int failures = 0;

static void check(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "FAILED: %s (last error: \"%s\")\n", what, ocrt_last_error());
    ++failures;
  }
}

int main(int argc, char** argv) {
  ocrt_model* model;
  ocrt_result* result;
  unsigned char white[32][80];
  ocrt_image images[2];
  char version[32];

  if (argc != 4) {
    fprintf(stderr, "usage: %s MODEL IMAGE EXPECTED_TEXT\n", argv[0]);
    return 2;
  }
  sprintf(version, "%d.%d.%d", OCRT_VERSION_MAJOR, OCRT_VERSION_MINOR, OCRT_VERSION_PATCH);
  check(strcmp(ocrt_version(), version) == 0, "ocrt_version() matches the header's version");

  check(ocrt_open(NULL, "cpu", 0) == NULL, "ocrt_open(NULL) fails");
  check(strstr(ocrt_last_error(), "model_path is NULL") != NULL, "... saying why");
  check(ocrt_open(argv[1], "tpu:0", 0) == NULL, "ocrt_open on a bad device fails");
  check(strstr(ocrt_last_error(), "tpu:0") != NULL, "... naming it");

  check(ocrt_open_decoding(argv[1], "cpu", 2, "viterbi", NULL) == NULL, "ocrt_open_decoding with another decoder fails");
  check(strstr(ocrt_last_error(), "viterbi") != NULL, "... naming it");
  model = ocrt_open_decoding(argv[1], "cpu", 2, "greedy", NULL);
  check(model != NULL, "ocrt_open_decoding(MODEL, greedy)");
  ocrt_close(model);

  model = ocrt_open(argv[1], "cpu", 2);
  check(model != NULL, "ocrt_open(MODEL)");
  if (!model) return 1;
  check(ocrt_last_error()[0] == '\0', "no error after a call that worked");

  result = ocrt_recognize_file(model, argv[2]);
  check(result != NULL && ocrt_result_count(result) == 1, "one result for one file");
  check(ocrt_result_error(result, 0) == NULL, "the line was read");
  check(ocrt_result_text(result, 0) && strcmp(ocrt_result_text(result, 0), argv[3]) == 0, "its text");
  check(ocrt_result_confidence(result, 0) > 0.5 && ocrt_result_confidence(result, 0) <= 1, "its confidence");
  check(ocrt_result_text(result, 1) == NULL, "no line 1");
  check(isnan(ocrt_result_confidence(result, 1)), "no confidence for line 1");
  printf("%s\t%s\t%.4f\n", argv[2], ocrt_result_text(result, 0), ocrt_result_confidence(result, 0));
  ocrt_result_free(result);

  /* A white page is blank: "" with confidence 1. The second image says its rows are narrower
   * than its width, which fails the whole call. */
  memset(white, 255, sizeof white);
  images[0].pixels = &white[0][0];
  images[0].width = 80;
  images[0].height = 32;
  images[0].stride = 80;
  result = ocrt_recognize_grays(model, images, 1);
  check(result != NULL && ocrt_result_error(result, 0) == NULL, "a white page is read");
  check(result != NULL && strcmp(ocrt_result_text(result, 0), "") == 0, "... as empty text");
  check(ocrt_result_confidence(result, 0) == 1.0, "... with confidence 1");
  ocrt_result_free(result);
  images[1] = images[0];
  images[1].stride = 79;
  check(ocrt_recognize_grays(model, images, 2) == NULL, "a stride below the width fails the call");
  check(strstr(ocrt_last_error(), "image 1") != NULL, "... naming the image");

  ocrt_close(model);
  if (failures) return 1;
  printf("C API from C: all checks passed\n");
  return 0;
}
