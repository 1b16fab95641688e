"""Checks of `moetrain plot` output for tests/plot_tests.sh, standard library only.

  plot_check.py svg FILE                     well-formed SVG 1.1: size, viewBox, no scripts; prints "ok"
  plot_check.py points FILE CLASS            point counts of the polylines of that class, in file order
  plot_check.py count FILE TAG [CLASS]       number of such elements
  plot_check.py png FILE [R,G,B MIN]         a rendered chart is not blank: enough ink, several colours,
                                             and at least MIN pixels of exactly R,G,B (a line's colour)
Exit status 1 with the reason when a check fails.
"""
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

NS = "{http://www.w3.org/2000/svg}"


def fail(why):
    print(why)
    sys.exit(1)


def elements(path, tag, cls=None):
    root = ET.parse(path).getroot()
    return [e for e in root.iter(NS + tag) if cls is None or e.get("class") == cls]


def check_svg(path):
    root = ET.parse(path).getroot()  # raises on malformed XML, unescaped text included
    if root.tag != NS + "svg" or root.get("version") != "1.1":
        fail(f"{path}: root is {root.tag} version {root.get('version')}, not SVG 1.1")
    w, h = root.get("width"), root.get("height")
    if not (w and h and root.get("viewBox") == f"0 0 {w} {h}"):
        fail(f"{path}: width {w}, height {h}, viewBox {root.get('viewBox')} do not agree")
    if "sans-serif" not in (root.get("font-family") or ""):
        fail(f"{path}: no sans-serif font-family")
    for bad in ("script", "foreignObject"):
        if list(root.iter(NS + bad)):
            fail(f"{path}: contains <{bad}>")
    print("ok")


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path}: not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or colour_type not in (2, 6) or interlace:
        fail(f"{path}: PNG format {depth}-bit type {colour_type} interlace {interlace} not handled")
    bpp = 4 if colour_type == 6 else 3
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def check_png(path, colour=None, least=0):
    width, height, bpp, rows = read_png(path)
    counts = {}
    for line in rows:
        for i in range(0, len(line), bpp):
            px = line[i:i + 3] if bpp == 3 or line[i + 3] == 255 else b"\xff\xff\xff"  # transparent: background
            counts[px] = counts.get(px, 0) + 1
    ink = width * height - counts.get(b"\xff\xff\xff", 0)
    exact = counts.get(bytes(colour), 0) if colour else 0
    summary = f"{width}x{height}, {ink} non-white pixels ({100 * ink / (width * height):.1f}%), {len(counts)} colours"
    if ink < 0.01 * width * height or len(counts) < 8:
        fail(f"{path}: blank or nearly: {summary}")
    if colour and exact < least:
        fail(f"{path}: {exact} pixels of {colour}, wanted at least {least}: {summary}")
    print(f"ok {summary}" + (f", {exact} of {colour}" if colour else ""))


if __name__ == "__main__":
    cmd, path = sys.argv[1], sys.argv[2]
    if cmd == "svg":
        check_svg(path)
    elif cmd == "points":
        print(" ".join(str(len(e.get("points").split())) for e in elements(path, "polyline", sys.argv[3])))
    elif cmd == "count":
        print(len(elements(path, sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)))
    elif cmd == "png":
        colour = [int(v) for v in sys.argv[3].split(",")] if len(sys.argv) > 3 else None
        check_png(path, colour, int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    else:
        fail(f"unknown check {cmd}")
