#!/usr/bin/env python3
"""Makes bench/data/val-texts.txt, the fixed text of the accuracy benchmark (bench/accuracy.sh).

The prose comes only from /usr/share/common-licenses/ (Debian's base-files): that folder is
reserved for evaluation, so no training text may come from it, and every Debian machine has the
same copy. Each license is cut into paragraphs (blank lines), paragraphs seen before in another
license are dropped (GPL-2, LGPL-2 and LGPL-2.1 or GFDL-1.2 and 1.3 share most of their text),
and each paragraph is re-wrapped at word boundaries into lines of 8 to 60 characters, each
line's target length drawn afresh so that short and long lines both occur. Lines keep only the
95 printable ASCII characters (typographic quotes and dashes are mapped; a line with anything
else is dropped), lines holding a run of underscores (the blanks of a form, "Copyright (C)
______", which print as one rule of no countable length) and duplicates are dropped, and the rest are shuffled with a fixed seed (so any
prefix, as `head -n N` takes, is a fair sample) and cut to --lines. Standard library only; the
same inputs give the same file.

    python3 bench/val_texts.py [--out bench/data/val-texts.txt] [--lines 3000] [--seed 17]
"""
import argparse
import os
import random
import re
import sys

LICENSES = "/usr/share/common-licenses"
MIN_CHARS, MAX_CHARS = 8, 60
# Characters outside printable ASCII that have an obvious ASCII spelling; others drop the line.
ASCII_MAP = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-",
             "\u2014": "--", "\u00a0": " ", "\u00a9": "(c)"}


def paragraphs(text):
    """Blank-line separated paragraphs with their whitespace collapsed to single spaces."""
    text = text.replace("\f", "\n")
    for block in re.split(r"\n\s*\n", text):
        words = block.split()
        if words:
            yield " ".join(words)


def printable_ascii(s):
    s = "".join(ASCII_MAP.get(ch, ch) for ch in s)
    return s if all(" " <= ch <= "~" for ch in s) else None


def wrap(paragraph, rng):
    """Greedy wrapping at spaces, with a fresh target length for every line."""
    words, lines, line = paragraph.split(" "), [], ""
    target = rng.randint(MIN_CHARS, MAX_CHARS)
    for w in words:
        if len(w) > MAX_CHARS:  # a word that cannot fit any line (none in practice) ends it
            lines.append(line)
            line, target = "", rng.randint(MIN_CHARS, MAX_CHARS)
            continue
        candidate = w if not line else line + " " + w
        if len(candidate) <= target or (not line and len(candidate) <= MAX_CHARS):
            line = candidate
        else:
            lines.append(line)
            line, target = w, rng.randint(MIN_CHARS, MAX_CHARS)
    lines.append(line)
    # the short tail of a paragraph is kept only when it is long enough
    return [l for l in lines if MIN_CHARS <= len(l) <= MAX_CHARS]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "val-texts.txt"))
    ap.add_argument("--lines", type=int, default=3000, help="lines kept (all when fewer)")
    ap.add_argument("--seed", type=int, default=17)
    a = ap.parse_args()

    rng = random.Random(a.seed)
    # each file once, under its own name (GPL, LGPL and GFDL are links to the latest versions)
    files = sorted({os.path.realpath(os.path.join(LICENSES, f)) for f in os.listdir(LICENSES)})
    seen_par, seen_line, lines, dropped, blanks = set(), set(), [], 0, 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for par in paragraphs(text):
            if par in seen_par:
                continue
            seen_par.add(par)
            for line in wrap(par, rng):
                line = printable_ascii(line)
                if line is None:
                    dropped += 1
                    continue
                line = line.strip()
                if "__" in line:  # the blanks of a form: a rule whose length no reader can count
                    blanks += 1
                    continue
                if MIN_CHARS <= len(line) <= MAX_CHARS and line not in seen_line:
                    seen_line.add(line)
                    lines.append(line)
    rng.shuffle(lines)
    total = len(lines)
    lines = lines[:a.lines]
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w", encoding="ascii", newline="\n") as f:
        f.write("".join(l + "\n" for l in lines))
    chars = sum(len(l) for l in lines)
    print(f"val_texts.py: {len(files)} files, {total} distinct lines ({dropped} dropped for non-ASCII, "
          f"{blanks} for runs of underscores), "
          f"wrote {len(lines)} lines, {chars} characters, mean {chars / max(1, len(lines)):.1f} to {a.out}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
