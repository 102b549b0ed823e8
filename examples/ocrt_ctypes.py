#!/usr/bin/env python3
"""Reads text-line images through ocrt's C API (libocrt.so) with Python's own ctypes: no module
to build, nothing outside the standard library (docs/library.md).

    python3 examples/ocrt_ctypes.py --lib PREFIX/lib/libocrt.so samples/lines/*.png

prints path, text, confidence and error per image, tab-separated, exactly as
`ocrt-infer --format tsv` does for the same images. Without --model it uses the shipped model
installed beside the library (PREFIX/share/ocrt/weights/crnn-en.safetensors).
"""
import argparse
import ctypes
import os
import sys


class Ocrt:
    """The C API of capi/ocrt.h, with its argument and result types declared: ctypes would
    otherwise take every result for an int and cut 64-bit pointers in half."""

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        P = ctypes.c_void_p  # ocrt_model* and ocrt_result*: opaque handles
        for name, restype, argtypes in [
            ("ocrt_version", ctypes.c_char_p, []),
            ("ocrt_last_error", ctypes.c_char_p, []),
            ("ocrt_open", P, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]),
            ("ocrt_open_decoding", P, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                       ctypes.c_char_p]),
            ("ocrt_close", None, [P]),
            ("ocrt_recognize_files", P, [P, ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t]),
            ("ocrt_result_count", ctypes.c_size_t, [P]),
            ("ocrt_result_text", ctypes.c_char_p, [P, ctypes.c_size_t]),
            ("ocrt_result_confidence", ctypes.c_double, [P, ctypes.c_size_t]),
            ("ocrt_result_error", ctypes.c_char_p, [P, ctypes.c_size_t]),
            ("ocrt_result_free", None, [P]),
        ]:
            f = getattr(lib, name)
            f.restype, f.argtypes = restype, argtypes
        self.lib = lib

    def error(self):
        return self.lib.ocrt_last_error().decode()

    def open(self, model, device="cpu", threads=0, decoder="auto", lm=None):
        """decoder: auto (ocrt-infer's default: the LM beside the model on the lines in doubt),
        greedy or beam; lm: a language model file (ocrt-lm), or None."""
        handle = self.lib.ocrt_open_decoding(os.fsencode(model), device.encode(), threads, decoder.encode(),
                                             os.fsencode(lm) if lm is not None else None)
        if not handle:
            raise RuntimeError(self.error())
        return handle

    def recognize(self, model, paths):
        """[(text, confidence, error)] per path, in order; error is None for a line that was read."""
        array = (ctypes.c_char_p * len(paths))(*[os.fsencode(p) for p in paths])
        result = self.lib.ocrt_recognize_files(model, array, len(paths))
        if not result:
            raise RuntimeError(self.error())
        try:
            lines = []
            for i in range(self.lib.ocrt_result_count(result)):
                error = self.lib.ocrt_result_error(result, i)
                lines.append((self.lib.ocrt_result_text(result, i).decode(),
                              self.lib.ocrt_result_confidence(result, i),
                              error.decode() if error is not None else None))
            return lines
        finally:
            self.lib.ocrt_result_free(result)


def tsv_field(s):
    # ocrt-infer's escapes (infer/report.cpp), so that both print the same bytes.
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("images", nargs="+")
    ap.add_argument("--lib", default=os.environ.get("OCRT_LIB", "libocrt.so"),
                    help="libocrt.so to load (default: $OCRT_LIB, else the loader's search path)")
    ap.add_argument("--model", help="model file (default: the shipped model beside --lib)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda:N, or a list such as cuda:0,cpu")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all)")
    ap.add_argument("--decoder", default="auto", choices=["auto", "greedy", "beam"],
                    help="auto (ocrt-infer's default), greedy (the fastest) or beam")
    ap.add_argument("--lm", help="language model file for the beam (default with auto: lm-en.clm beside the model)")
    args = ap.parse_args()

    model_path = args.model
    if model_path is None:
        if os.sep not in args.lib:
            sys.exit("ocrt_ctypes.py: give --model, or --lib as a path (the shipped model is found beside it)")
        # PREFIX/lib/libocrt.so, or PREFIX/lib/<multiarch>/libocrt.so
        here = os.path.dirname(os.path.realpath(args.lib))
        tried = [os.path.join(here, *[".."] * up, "share", "ocrt", "weights", "crnn-en.safetensors") for up in (1, 2)]
        model_path = next((p for p in tried if os.path.isfile(p)), tried[0])

    # The text is UTF-8 whatever the locale, as ocrt-infer writes it; paths go back out as given.
    sys.stdout.reconfigure(encoding="utf-8", errors="surrogateescape")
    ocrt = Ocrt(args.lib)
    print(f"ocrt {ocrt.lib.ocrt_version().decode()} from {args.lib}", file=sys.stderr)
    model = ocrt.open(model_path, args.device, args.threads, args.decoder, args.lm)
    try:
        lines = ocrt.recognize(model, args.images)
    finally:
        ocrt.lib.ocrt_close(model)
    failed = 0
    for path, (text, confidence, error) in zip(args.images, lines):
        failed += error is not None
        shown = "" if error is not None else f"{confidence:.4f}"
        print(f"{tsv_field(path)}\t{tsv_field(text)}\t{shown}\t{tsv_field(error or '')}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
