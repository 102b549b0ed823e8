#!/usr/bin/env python3
"""Looks at a training report (train/report.h) as a person would: in headless Chromium.

    report_screenshot.py --browser CHROMIUM --work DIR PAGE [SAME_PAGE]

1. A copy of PAGE with a small script added (the report itself has none) tells where each
   chart (svg.chart), its plot area (rect.plot-area) and each line image are on the page, how
   wide the page is, and whether each image decoded (chromium --dump-dom).
2. Chromium takes screenshots of PAGE as it is, in the light and in the dark colour scheme, down
   to the first line image.
3. In each screenshot, every chart's plot area must hold pixels of a series colour (lines and
   dots are the only saturated colours there: grid, axes and text are gray), its background
   must be light in the light scheme and dark in the dark one, the first line image must show
   dark ink on light paper, no chart may overlap another, and nothing may be wider than the
   window.
4. The same page with its lines and dots taken out must fail the chart check: a check that
   could not fail would prove nothing.

SAME_PAGE, when given, is the page ocrt-train wrote for the same run: its charts must be the
ones of PAGE (ocrt-report's), byte for byte.

Python's standard library only: the PNG screenshots are decoded here (zlib and the five PNG
row filters). Exits 0 when every check passes, 1 otherwise, naming what failed.
"""
import argparse
import html
import json
import os
import re
import struct
import subprocess
import sys
import zlib

WIDTH = 1200  # the window: two columns of charts


def fail(msg):
    print("FAILED: " + msg)
    sys.exit(1)


def decode_png(path):
    """(width, height, channels, rows): rows[y] is a bytes object of width * channels samples."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = header
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace != 0:
        fail(f"{path}: a PNG this checker does not read (depth {depth}, colour type {color}, interlace {interlace})")
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:  # Sub
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 255
        elif kind == 2:  # Up
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif kind == 3:  # Average
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif kind == 4:  # Paeth
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b = prev[i]
                c = prev[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        elif kind != 0:
            fail(f"{path}: unknown PNG filter {kind} in row {y}")
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def pixels_in(png, rect, inset=3):
    """The (r, g, b) pixels inside rect = [x, y, w, h] (page coordinates), `inset` from its edges."""
    width, height, channels, rows = png
    x0, y0 = int(rect[0]) + inset, int(rect[1]) + inset
    x1, y1 = min(width, int(rect[0] + rect[2]) - inset), min(height, int(rect[1] + rect[3]) - inset)
    for y in range(max(0, y0), y1):
        row = rows[y]
        for x in range(max(0, x0), x1):
            p = row[x * channels:x * channels + 3] if channels >= 3 else row[x * channels:x * channels + 1] * 3
            yield p[0], p[1], p[2]


def chromium(browser, work, args):
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           "--disable-extensions", "--mute-audio", "--disable-breakpad", "--disable-crash-reporter",
           "--force-device-scale-factor=1",
           "--user-data-dir=" + os.path.join(work, "chromium-profile")] + args
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)
    if r.returncode != 0:
        fail("chromium failed: " + " ".join(cmd) + "\n" + r.stderr.decode(errors="replace")[-2000:])
    return r.stdout.decode(errors="replace")


PROBE = """<script>
(function () {
  function box(e) {
    var r = e.getBoundingClientRect();
    return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height];
  }
  var out = {charts: [], images: [], scrollWidth: document.documentElement.scrollWidth,
             scrollHeight: document.documentElement.scrollHeight, innerWidth: window.innerWidth,
             dark: window.matchMedia("(prefers-color-scheme: dark)").matches};
  document.querySelectorAll("svg.chart").forEach(function (s) {
    var plot = s.querySelector("rect.plot-area");
    out.charts.push({id: s.id, box: box(s), plot: plot ? box(plot) : null});
  });
  document.querySelectorAll("img").forEach(function (i) {
    out.images.push({box: box(i), natural: [i.naturalWidth, i.naturalHeight], complete: i.complete});
  });
  var pre = document.createElement("pre");
  pre.id = "ocrt-probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def probe(browser, work, page):
    text = open(page, encoding="utf-8").read()
    if "<script" in text:
        fail(f"{page} holds a script; the report must have none")
    path = os.path.join(work, "probe.html")
    open(path, "w", encoding="utf-8").write(text.replace("</body>", PROBE + "</body>"))
    dom = chromium(browser, work, [f"--window-size={WIDTH},1000", "--dump-dom", "file://" + path])
    m = re.search(r'<pre id="ocrt-probe">(.*?)</pre>', dom, re.S)
    if not m:
        fail("the probe script's result is not in chromium's DOM:\n" + dom[-2000:])
    return json.loads(html.unescape(m.group(1)))


def screenshot(browser, work, page, name, height, dark):
    out = os.path.join(work, name)
    if os.path.exists(out):
        os.remove(out)
    args = [f"--window-size={WIDTH},{height}", "--screenshot=" + out, "file://" + page]
    chromium(browser, work, (["--force-dark-mode"] if dark else []) + args)
    if not os.path.exists(out):
        fail("chromium wrote no screenshot " + out)
    return decode_png(out)


def saturated(px):
    r, g, b = px
    return max(r, g, b) - min(r, g, b) >= 60


def luminance(px):
    r, g, b = px
    return 0.299 * r + 0.587 * g + 0.114 * b


def check_charts(png, layout, scheme, expect_lines=True):
    """Problems with the charts in one screenshot (empty when none)."""
    problems = []
    for c in layout["charts"]:
        if c["plot"] is None:
            problems.append(f"{c['id']}: no plot area")
            continue
        pixels = list(pixels_in(png, c["plot"]))
        coloured = sum(1 for p in pixels if saturated(p))
        mean = sum(luminance(p) for p in pixels) / max(1, len(pixels))
        print(f"  {scheme:5} {c['id']:18} {coloured:5} line pixels, background luminance {mean:5.1f}")
        if expect_lines and coloured < 40:
            problems.append(f"{scheme}: {c['id']}: {coloured} pixels of a series colour in its plot area")
        if not expect_lines and coloured > 0:
            problems.append(f"{scheme}: {c['id']}: {coloured} series-coloured pixels with the lines taken out")
        if scheme == "light" and mean < 200:
            problems.append(f"light: {c['id']}: the plot area is dark (mean luminance {mean:.0f})")
        if scheme == "dark" and mean > 80:
            problems.append(f"dark: {c['id']}: the plot area is light (mean luminance {mean:.0f})")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--browser", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("page")
    ap.add_argument("same_page", nargs="?")
    a = ap.parse_args()
    page = os.path.abspath(a.page)
    text = open(page, encoding="utf-8").read()

    if a.same_page:
        other = open(a.same_page, encoding="utf-8").read()
        svgs = re.findall(r"<svg.*?</svg>", text, re.S)
        if svgs != re.findall(r"<svg.*?</svg>", other, re.S):
            fail(f"the charts of {a.same_page} (ocrt-train's) differ from those of {page} (ocrt-report's)")
        print(f"ocrt-train's page and ocrt-report's have the same {len(svgs)} charts")

    layout = probe(a.browser, a.work, page)
    charts, images = layout["charts"], layout["images"]
    print(f"{len(charts)} charts, {len(images)} line images, page {layout['scrollWidth']}x{layout['scrollHeight']}")
    problems = []
    if len(charts) != 8:
        problems.append(f"{len(charts)} charts on the page, expected 8")
    if layout["scrollWidth"] > layout["innerWidth"]:
        problems.append(f"the page is {layout['scrollWidth']} px wide in a {layout['innerWidth']} px window")
    for i, c in enumerate(charts):
        if c["box"][2] < 300:
            problems.append(f"{c['id']} is only {c['box'][2]:.0f} px wide")
        for d in charts[i + 1:]:
            (x, y, w, h), (u, v, p, q) = c["box"], d["box"]
            if x < u + p and u < x + w and y < v + q and v < y + h:
                problems.append(f"{c['id']} overlaps {d['id']}")
    if not images:
        problems.append("no line images on the page (the run's worst lines)")
    for i, im in enumerate(images):
        if not im["complete"] or im["natural"][0] == 0:
            problems.append(f"line image {i + 1} did not decode")

    # Down to the first line image.
    bottom = max([c["box"][1] + c["box"][3] for c in charts] +
                 [images[0]["box"][1] + images[0]["box"][3] if images else 0])
    height = int(bottom) + 20
    for scheme in ("light", "dark"):
        png = screenshot(a.browser, a.work, page, f"report-{scheme}.png", height, scheme == "dark")
        problems += check_charts(png, layout, scheme)
        if images:
            ink = [luminance(p) for p in pixels_in(png, images[0]["box"], inset=2)]
            dark_px, light_px = sum(1 for v in ink if v < 100), sum(1 for v in ink if v > 200)
            print(f"  {scheme:5} line image 1: {dark_px} ink pixels, {light_px} paper pixels")
            if dark_px < 50 or light_px < 50:
                problems.append(f"{scheme}: line image 1 shows no ink on paper ({dark_px} dark, {light_px} light)")

    # The same page without its lines must fail the chart check.
    bare = re.sub(r"<polyline [^>]*/>|<circle [^>]*/>", "", text)
    bare_path = os.path.join(a.work, "report-without-lines.html")
    open(bare_path, "w", encoding="utf-8").write(bare)
    png = screenshot(a.browser, a.work, bare_path, "report-without-lines.png", height, False)
    problems += check_charts(png, layout, "light", expect_lines=False)

    if problems:
        fail("\n  ".join([""] + problems))
    print("the report looks right: every chart drawn, light and dark")


if __name__ == "__main__":
    main()
