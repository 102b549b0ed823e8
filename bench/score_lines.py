#!/usr/bin/env python3
"""Scores OCR engines on a folder of text lines and prints markdown tables (bench/accuracy.sh).

The truth is a folder of NAME.png + NAME.gt.txt pairs (searched below, one trailing newline of
the .gt.txt stripped, as ocrt's data loader does). Each engine's reading is a TSV of
path<TAB>text (ocrt-infer --format tsv writes it, with \\t, \\n and \\\\ escaped inside fields;
further columns are ignored); paths are matched to the truth images by their real path. A line
an engine did not report, or reported with an empty text and an error, counts as read empty.

CER: Levenshtein distance over Unicode characters summed over lines / characters of the truth
(as ocrt-infer --eval). Line accuracy: lines read exactly right. Both are given as read and
"folded": typographic quotes, dashes, ligatures and the ellipsis mapped to their ASCII spelling
(FOLD below) in what the engine read, as Tesseract writes ' and " of the print as curly quotes
and the truth is ASCII; the group tables use the folded figures. With --levels L1,L2 the folders
below the truth root name the groups (e.g. render/clean/NimbusSans-Regular/000.png: level 1 is
the degradation, level 2 the font), and there is a table per level besides the overall one.
Standard library only.

    score_lines.py --truth DIR --engine ocrt=ocrt.tsv --engine tesseract=tess.tsv
                   [--levels degradation,font] [--seconds ocrt=41.2 ...] [--title TEXT]
"""
import argparse
import collections
import os
import sys


# What an engine may write for a printed ASCII character (Tesseract's eng model: curly quotes
# for straight ones, ligatures), spelled in ASCII.
FOLD = {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'", "\u00b4": "'",
        "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-",
        "\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
        "\u2026": "...", "\u00a0": " "}


def fold(s):
    return "".join(FOLD.get(ch, ch) for ch in s)


def levenshtein(a, b):
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def unescape(field):
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 1 < len(field):
            out.append({"t": "\t", "n": "\n", "\\": "\\"}.get(field[i + 1], field[i:i + 2]))
            i += 2
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def read_truth(root):
    """{real path of the image: (group path parts, truth text)} for every NAME.png + NAME.gt.txt."""
    truth = {}
    for d, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".gt.txt"):
                continue
            png = os.path.join(d, f[:-len(".gt.txt")] + ".png")
            if not os.path.exists(png):
                continue
            with open(os.path.join(d, f), encoding="utf-8") as fh:
                text = fh.read()
            if text.endswith("\n"):
                text = text[:-1]
            parts = os.path.relpath(d, root).split(os.sep)
            truth[os.path.realpath(png)] = ([] if parts == ["."] else parts, text)
    return truth


def read_tsv(path):
    texts = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line:
                continue
            cols = line.split("\t")
            texts[os.path.realpath(unescape(cols[0]))] = unescape(cols[1]) if len(cols) > 1 else ""
    return texts


class Tally:
    def __init__(self):
        self.lines = self.right = self.dist = self.chars = 0

    def add(self, truth, text):
        d = levenshtein(truth, text)
        self.lines += 1
        self.right += d == 0 and truth == text
        self.dist += d
        self.chars += len(truth)

    def cer(self):
        return 100.0 * self.dist / max(1, self.chars)

    def acc(self):
        return 100.0 * self.right / max(1, self.lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--truth", required=True, help="folder of NAME.png + NAME.gt.txt pairs (searched below)")
    ap.add_argument("--engine", action="append", required=True, metavar="NAME=TSV", help="an engine's readings")
    ap.add_argument("--levels", default="", help="names of the folder levels below --truth, comma-separated")
    ap.add_argument("--seconds", action="append", default=[], metavar="NAME=S",
                    help="wall seconds an engine took for all the lines (adds lines/s)")
    ap.add_argument("--title", default="", help="a heading printed above the tables")
    ap.add_argument("--worst", type=int, default=0, help="also list each engine's N worst lines")
    a = ap.parse_args()

    truth = read_truth(a.truth)
    if not truth:
        sys.exit(f"score_lines.py: no NAME.png + NAME.gt.txt pairs under {a.truth}")
    engines = [e.split("=", 1) for e in a.engine]
    seconds = dict(s.split("=", 1) for s in a.seconds)
    levels = [l for l in a.levels.split(",") if l]
    overall = {name: Tally() for name, _ in engines}
    folded = {name: Tally() for name, _ in engines}
    by_level = [collections.defaultdict(lambda: {name: Tally() for name, _ in engines}) for _ in levels]
    missing, worst = collections.Counter(), collections.defaultdict(list)
    for name, tsv in engines:
        texts = read_tsv(tsv)
        for path, (parts, t) in sorted(truth.items()):
            if path not in texts:
                missing[name] += 1
            text = texts.get(path, "")
            overall[name].add(t, text)
            folded[name].add(t, fold(text))
            for k in range(len(levels)):
                by_level[k][parts[k] if k < len(parts) else "?"][name].add(t, fold(text))
            if a.worst and fold(text) != t:
                worst[name].append((levenshtein(t, fold(text)) / max(1, len(t)), path, t, text))

    names = [n for n, _ in engines]
    if a.title:
        print(f"### {a.title}\n")
    head = ("| engine | lines | truth chars | CER | line accuracy | CER folded | line acc. folded |"
            + (" wall s | lines/s |" if seconds else ""))
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    for n in names:
        t, f = overall[n], folded[n]
        row = f"| {n} | {t.lines} | {t.chars} | {t.cer():.2f}% | {t.acc():.1f}% | {f.cer():.2f}% | {f.acc():.1f}% |"
        if seconds:
            s = float(seconds[n]) if n in seconds else None
            row += f" {s:.1f} | {t.lines / s:.1f} |" if s else " - | - |"
        print(row)
    for n in names:
        if missing[n]:
            print(f"\n{n}: {missing[n]} line(s) missing from its TSV, counted as read empty")
    for k, level in enumerate(levels):
        print(f"\nBy {level} (folded):\n")
        print(f"| {level} | lines | " + " | ".join(f"{n} CER" for n in names) + " | "
              + " | ".join(f"{n} line acc." for n in names) + " |")
        print("| --- | --- |" + " --- |" * (2 * len(names)))
        for g in sorted(by_level[k]):
            t = by_level[k][g]
            print(f"| {g} | {t[names[0]].lines} | " + " | ".join(f"{t[n].cer():.2f}%" for n in names) + " | "
                  + " | ".join(f"{t[n].acc():.1f}%" for n in names) + " |")
    for n in names:
        if worst[n]:
            print(f"\n{n}, worst lines (folded CER, truth, read as is):\n")
            for cer, path, t, text in sorted(worst[n], key=lambda w: (-w[0], w[1]))[:a.worst]:
                print(f"- {100 * cer:.0f}% `{os.path.relpath(path, a.truth)}`: `{t}` -> `{text}`")
    print()


if __name__ == "__main__":
    main()
