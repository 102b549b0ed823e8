/* ocrt's C API: text-line recognition from C, or from any language that can call C (Python's
 * ctypes: examples/ocrt_ctypes.py). It is a thin layer over the C++ predictor
 * (infer/predictor.h): the same preprocessing, batching and, by default, decoding as ocrt-infer
 * (the shipped language model beside the shipped model), so a line reads the same here as
 * there. docs/library.md is the reference; in short:
 *
 *   ocrt_model* m = ocrt_open("crnn-en.safetensors", "cpu", 0);
 *   if (!m) { fprintf(stderr, "%s\n", ocrt_last_error()); return 1; }
 *   ocrt_result* r = ocrt_recognize_file(m, "line.png");
 *   if (r && !ocrt_result_error(r, 0)) printf("%s %.4f\n", ocrt_result_text(r, 0), ocrt_result_confidence(r, 0));
 *   ocrt_result_free(r);
 *   ocrt_close(m);
 *
 * Two kinds of failure, kept apart:
 *  - A call that cannot do its work (a NULL argument, a model file that does not load, a
 *    device that does not exist) returns NULL (or -1, NaN) and leaves a message for
 *    ocrt_last_error(), which is per thread.
 *  - A line that cannot be read (a missing or broken image, one outside the predictor's size
 *    limits) does not fail the call: the result has an error for that line, and the other
 *    lines of the batch are read as usual.
 * No C++ exception crosses this interface; every function catches everything.
 *
 * Strings are UTF-8 and NUL-terminated. Every string returned belongs to the object it came
 * from and lives as long as it does (ocrt_last_error's until the thread's next ocrt call).
 *
 * Threads: any function may be called from any thread. A model serves one recognition at a
 * time; calls from several threads on the same model wait for each other (a model already
 * uses the CPU threads it was opened with, and one worker thread per device).
 */
#ifndef OCRT_CAPI_OCRT_H
#define OCRT_CAPI_OCRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the headers; ocrt_version() gives the library's, which a program loaded
 * against another build may differ from. */
#define OCRT_VERSION_MAJOR 0
#define OCRT_VERSION_MINOR 1
#define OCRT_VERSION_PATCH 0
#define OCRT_VERSION_STRING "0.1.0"

/* "0.1.0": the version of the library that is running. */
const char* ocrt_version(void);

/* The message of the last call on this thread that failed, or "" when the last call
 * succeeded. Never NULL. */
const char* ocrt_last_error(void);

typedef struct ocrt_model ocrt_model;
typedef struct ocrt_result ocrt_result;

/* Opens a model file (a self-contained ocrt model such as the shipped crnn-en.safetensors; a
 * weights-only file needs the C++ API, which can name its arch and charset).
 *   device   "cpu", "cuda:N", or a comma-separated list with one worker per entry
 *            ("cuda:0,cpu"; a GPU may appear once, "cpu" several times). NULL means "cpu".
 *            "cpu" alone is one worker a thread (at most 4), sharing one model; a batch with
 *            no other beside it (a lone line) runs on every thread.
 *   threads  CPU threads for decoding images and for the CPU workers; 0 for the default
 *            (OMP_NUM_THREADS, else every processor).
 * Loads and checks the whole model before returning. NULL on failure (a missing or corrupt
 * file, a device that does not exist or that this build lacks, threads < 0). */
ocrt_model* ocrt_open(const char* model_path, const char* device, int threads);

/* ocrt_open with the decoding named (ocrt_open is decoder "auto", lm_path NULL):
 *   decoder  "auto": ocrt-infer's default. Every line is read greedily, and the lines in doubt
 *            (a frame whose runner-up class has probability 0.2 or more) go through the
 *            prefix beam with a character language model: lm_path, or else the file
 *            lm-en.clm in the model file's folder (where the shipped one is installed beside
 *            the shipped model), used only when it knows every character of the model; with
 *            neither, greedy. "greedy": the most likely class of each frame, the fastest.
 *            "beam": the beam on every line, with lm_path's LM when given. NULL means "auto".
 *   lm_path  a language model file written by ocrt-lm, or NULL; with "greedy" an error.
 * NULL on failure, as ocrt_open (also for another decoder name or an LM that does not load). */
ocrt_model* ocrt_open_decoding(const char* model_path, const char* device, int threads, const char* decoder,
                               const char* lm_path);

/* Frees the model and stops its worker threads. NULL is allowed. Results stay valid. */
void ocrt_close(ocrt_model* model);

/* An 8-bit gray image in memory: row y starts at pixels + y * stride (stride >= width), 0 is
 * black and 255 white. The pixels are copied during the call. */
typedef struct ocrt_image {
  const uint8_t* pixels;
  int width;
  int height;
  int stride;
} ocrt_image;

/* Recognition. Each returns a result with one entry per line, in input order (count 0 gives
 * an empty result), or NULL when the call itself fails: model NULL, paths or images NULL with
 * count > 0, an entry of paths NULL, an image with pixels NULL, a negative size or a stride
 * below its width. Lines are batched by width as in ocrt-infer, so one call with many lines
 * costs far less than one call per line. A zero-sized image is a line that fails.
 *   ocrt_recognize_file(s)  image files: PNG, JPEG, BMP, TGA, GIF, PGM/PPM
 *   ocrt_recognize_gray(s)  gray pixels; a line's name (in its error messages) is "image N",
 *                           N its index in the call */
ocrt_result* ocrt_recognize_file(ocrt_model* model, const char* path);
ocrt_result* ocrt_recognize_files(ocrt_model* model, const char* const* paths, size_t count);
ocrt_result* ocrt_recognize_gray(ocrt_model* model, const uint8_t* pixels, int width, int height, int stride);
ocrt_result* ocrt_recognize_grays(ocrt_model* model, const ocrt_image* images, size_t count);

/* The lines of a result (0 for NULL). */
size_t ocrt_result_count(const ocrt_result* result);

/* Line i's text, "" for a blank line or one that failed; NULL (with ocrt_last_error set) when
 * result is NULL or i is out of range. */
const char* ocrt_result_text(const ocrt_result* result, size_t i);

/* Line i's confidence in [0, 1]: the mean, over its characters, of the model's probability of
 * each where it was emitted (for an empty text, the mean blank probability; 1 for a blank
 * line). 0 for a line that failed; NaN (with ocrt_last_error set) for a bad result or index. */
double ocrt_result_confidence(const ocrt_result* result, size_t i);

/* NULL when line i was read; otherwise why not (the predictor's message, which names the
 * file or "image N"). For a bad result or index, the message that ocrt_last_error() gives. */
const char* ocrt_result_error(const ocrt_result* result, size_t i);

/* Frees a result. NULL is allowed. */
void ocrt_result_free(ocrt_result* result);

#ifdef __cplusplus
}
#endif

#endif /* OCRT_CAPI_OCRT_H */
