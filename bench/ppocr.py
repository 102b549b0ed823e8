#!/usr/bin/env python3
"""PP-OCRv6 small (pip rapidocr, its ONNX models inside the wheel, on ONNX Runtime) as a
benchmark peer: the model DEVELOPERS.md names as the one to beat. Benchmark-only, run in the
venv of bench/peers.sh; never a dependency of ocrt or of its tests.

  python bench/ppocr.py lines LIST --threads N            > TSV (path<TAB>text), one a line of LIST
  python bench/ppocr.py pages LIST --threads N --out DIR  (DIR/NAME.hocr for each page of LIST)
  python bench/ppocr.py version                           ("rapidocr X on onnxruntime Y", for reports)

LIST holds image paths, one a line. `lines` runs the recogniser alone on each image (no
detector, no orientation classifier): a line image is what it reads, as ocrt-infer --line does.
`pages` runs rapidocr's whole pipeline (PP-OCRv6 small detector, then the recogniser; its
orientation classifier off, as ocrt reads upright pages the same way unless turned) with word
boxes on (return_word_box), and writes each page as hOCR: an ocr_line per detected line (its
box's extent) holding an ocrx_word per word with its box and confidence, in rapidocr's order,
which bench_page_score reads like any other engine's hOCR.

rapidocr's own defaults otherwise (its config.yaml: detector input limit_side_len 736 with
limit_type min, box threshold 0.5, unclip 1.6; recogniser input 48 high, batches of 6);
ONNX Runtime's intra-op threads = --threads. On stderr: the images, the seconds of the whole
loop (model loading excluded; the caller times the whole process too) and images/s.
"""
import argparse
import html
import os
import sys
import time


def engine(threads):
    from rapidocr import RapidOCR

    return RapidOCR(params={
        "Global.log_level": "warning",
        "EngineConfig.onnxruntime.intra_op_num_threads": threads,
        "EngineConfig.onnxruntime.inter_op_num_threads": 1,
    })


def box_of(points):
    xs = [float(p[0]) for p in points]
    ys = [float(p[1]) for p in points]
    return int(round(min(xs))), int(round(min(ys))), int(round(max(xs))), int(round(max(ys)))


def hocr(path, width, height, result):
    name = html.escape(os.path.basename(path))
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>ppocr</title>',
           '<meta name="ocr-system" content="rapidocr PP-OCRv6 small"/></head><body>',
           f'<div class="ocr_page" id="page_1" title="image &quot;{name}&quot;; bbox 0 0 {width} {height}">']
    txts = result.txts or ()
    boxes = result.boxes if result.boxes is not None else []
    words = result.word_results or ()
    wid = 0
    for i, text in enumerate(txts):
        x0, y0, x1, y1 = box_of(boxes[i])
        out.append(f'<span class="ocr_line" id="line_{i + 1}" title="bbox {x0} {y0} {x1} {y1}">')
        line_words = words[i] if i < len(words) else ()
        if not line_words:  # no word boxes: the line's text as one word over its box
            line_words = [(text, 1.0, boxes[i])]
        for w in line_words:
            wtext, wscore, wbox = w[0], w[1], w[2]
            if not str(wtext).strip():
                continue
            wid += 1
            a, b, c, d = box_of(wbox)
            out.append(f'<span class="ocrx_word" id="word_{wid}" title="bbox {a} {b} {c} {d}; '
                       f'x_wconf {int(round(100 * float(wscore)))}">{html.escape(str(wtext))}</span>')
        out.append('</span>')
    out.append('</div></body></html>')
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["lines", "pages", "version"])
    ap.add_argument("list", nargs="?")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", help="pages: the folder for NAME.hocr")
    a = ap.parse_args()
    if a.mode == "version":
        import importlib.metadata as m

        print(f"rapidocr {m.version('rapidocr')} on onnxruntime {m.version('onnxruntime')}")
        return
    if not a.list:
        sys.exit(f"ppocr.py {a.mode}: give the LIST of image paths")
    paths = [p.strip() for p in open(a.list) if p.strip()]
    e = engine(a.threads)
    import cv2

    t0 = time.perf_counter()
    if a.mode == "lines":
        for p in paths:
            r = e(p, use_det=False, use_cls=False, use_rec=True)
            text = r.txts[0] if r.txts else ""
            sys.stdout.write(f"{p}\t{text}\n")
    else:
        if not a.out:
            sys.exit("ppocr.py pages: --out DIR is needed")
        os.makedirs(a.out, exist_ok=True)
        for p in paths:
            img = cv2.imread(p)
            if img is None:
                print(f"ppocr.py: {p}: cannot be read", file=sys.stderr)
                continue
            r = e(img, use_det=True, use_cls=False, use_rec=True, return_word_box=True)
            stem = os.path.splitext(os.path.basename(p))[0]
            with open(os.path.join(a.out, stem + ".hocr"), "w") as f:
                f.write(hocr(p, img.shape[1], img.shape[0], r))
    dt = time.perf_counter() - t0
    print(f"ppocr.py: {len(paths)} {a.mode} in {dt:.2f} s, {len(paths) / dt:.2f} {a.mode}/s, "
          f"{a.threads} threads", file=sys.stderr)


if __name__ == "__main__":
    main()
