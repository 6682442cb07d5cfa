#!/usr/bin/env python3
"""A flame graph (SVG) from `perf script` output, for machines without
Brendan Gregg's FlameGraph scripts or inferno (no network here).

    perf record -F 20000 -g -o run.perf -- COMMAND
    perf script -i run.perf | tools/flamegraph.py "title" > run.svg

Stacks are folded per process name (the first frame), root at the bottom,
each frame as wide as its share of the samples; hover a frame for its
name and share. Frames under 0.1% of the samples are left out.
"""

import collections
import html
import sys

WIDTH, ROW, FONT = 1200, 16, 11


def folded(lines):
    """Counts of stacks (root first) from perf script's text."""
    counts = collections.Counter()
    comm, stack = None, []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if comm is not None:
                counts[tuple([comm] + stack[::-1])] += 1
            comm, stack = None, []
        elif not line.startswith(("\t", " ")):
            comm = line.split()[0]
        else:
            parts = line.strip().split(None, 1)
            sym = parts[1] if len(parts) > 1 else parts[0]
            sym = sym.rsplit(" (", 1)[0]
            stack.append(sym.split("+0x")[0])
    if comm is not None:
        counts[tuple([comm] + stack[::-1])] += 1
    return counts


def tree(counts):
    root = {"n": 0, "kids": {}}
    for stack, n in counts.items():
        node = root
        node["n"] += n
        for frame in stack:
            node = node["kids"].setdefault(frame, {"n": 0, "kids": {}})
            node["n"] += n
    return root


def depth(node):
    return 1 + max((depth(k) for k in node["kids"].values()), default=0)


def svg(root, title):
    total = root["n"] or 1
    height = (depth(root) + 3) * ROW
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'font-family="DejaVu Sans, sans-serif" font-size="{FONT}">',
        f'<text x="{WIDTH / 2}" y="{ROW}" text-anchor="middle" font-size="{FONT + 4}">'
        f"{html.escape(title)} ({total} samples)</text>",
    ]

    def draw(name, node, x, level):
        w = node["n"] / total * WIDTH
        if node["n"] / total < 0.001:
            return
        y = height - (level + 1) * ROW
        hue = 20 + (hash(name) % 40)
        share = 100.0 * node["n"] / total
        label = html.escape(name)
        out.append(
            f'<g><title>{label} ({share:.2f}%)</title>'
            f'<rect x="{x:.2f}" y="{y}" width="{max(w - 0.5, 0.1):.2f}" height="{ROW - 1}" '
            f'fill="hsl({hue},90%,60%)"/>'
        )
        chars = int(w / (FONT * 0.6))
        if chars >= 3:
            text = label if len(label) <= chars else label[: chars - 2] + ".."
            out.append(f'<text x="{x + 2:.2f}" y="{y + ROW - 4}">{text}</text>')
        out.append("</g>")
        kx = x
        for kname, kid in sorted(node["kids"].items()):
            draw(kname, kid, kx, level + 1)
            kx += kid["n"] / total * WIDTH

    x = 0.0
    for name, kid in sorted(root["kids"].items()):
        draw(name, kid, x, 0)
        x += kid["n"] / total * WIDTH
    out.append("</svg>")
    return "\n".join(out)


def main():
    title = sys.argv[1] if len(sys.argv) > 1 else "perf"
    sys.stdout.write(svg(tree(folded(sys.stdin)), title) + "\n")


if __name__ == "__main__":
    main()
