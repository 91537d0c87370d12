#!/usr/bin/env python3
"""Turns `accel bench --json` files into PNG charts and median tables.

Uses Python's standard library and gnuplot (Debian: gnuplot-nox, which has the pngcairo terminal); it
is a tool for people reading benchmarks, not part of the library or its tests.

  plot_bench.py collective OUT.png RUN.json [RUN.json ...]
      busbw against message size (log x axis), one line per backend and rank count. Repeated runs
      of the same benchmark and rank count are combined into their median.
  plot_bench.py table RUN.json [RUN.json ...]
      the same medians as a Markdown table, with each backend's busbw ratio to its baseline.
  plot_bench.py precision OUT.png PRECISION.json [--device cpu]
      `accel bench precision --json` as bars, one panel per group (GEMM, elementwise and casts, the
      training step): each row's measured rate next to its device's reference.

Rows are filtered with --dtype (default f32), --redop (default sum; "none" for all-gather and
broadcast) and --place (out or in; default out, or in for broadcast).
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict


def gnuplot_string(text):
    return text.replace("\\", "\\\\").replace('"', '\\"')


def plot_precision(args):
    with open(args.json) as f:
        run = json.load(f)
    if run.get("benchmark") != "precision":
        sys.exit(f"plot_bench.py: {args.json} is not an accel bench precision file")
    device = args.device or run["devices"][0]["device"]
    names = {d["device"]: d["name"] for d in run["devices"]}
    rows = [r for r in run["rows"] if r["device"] == device and r["available"]]
    if not rows:
        sys.exit(f"plot_bench.py: no measured rows for device {device}")
    panels = [("gemm", "GEMM (GFLOP/s)", lambda r: f"{'eigen' if r['name'].startswith('eigen') else 'matmul'} {r['dtype']} {r['shape'].split('x')[0]}"),
              ("bandwidth", "elementwise, casts (GB/s, bytes read + written)",
               lambda r: r["name"] if r["group"] == "cast" else f"{r['name']} {r['dtype']}"),
              ("train_step", "training step (GFLOP/s)", lambda r: f"{r['name']} {r['dtype']}")]
    with tempfile.TemporaryDirectory() as tmp:
        parts = []
        for group, title, label in panels:
            selected = [r for r in rows if (r["group"] in ("elementwise", "cast", "unscale")) == (group == "bandwidth")
                        and (group == "bandwidth" or r["group"] == group)]
            if not selected:
                continue
            path = f"{tmp}/{group}.dat"
            with open(path, "w") as f:
                for r in selected:
                    f.write(f'"{gnuplot_string(label(r))}" {r["rate"]} {r["reference"] or 0}\n')
            refs = sorted({r["reference_name"] for r in selected if r["reference_name"]})
            parts.append(f"""
set title "{title}"
set ylabel "{selected[0]['unit']}"
plot '{path}' using 2:xtic(1) title 'measured', '' using 3 title "reference:\\n{gnuplot_string(', '.join(refs))}"
""")
        script = f"""
set terminal pngcairo size 1100,{330 * len(parts) + 40} font 'sans,10' noenhanced
set output '{args.out}'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -30 nomirror
set grid ytics
set key outside right top vertical spacing 2
set yrange [0:*]
set multiplot layout {len(parts)},1 title "accel bench precision on {device}: {gnuplot_string(names.get(device, ''))}, median of {run['iters']} runs"
{''.join(parts)}
unset multiplot
"""
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    print(f"plot_bench.py: wrote {args.out}")


def load(paths):
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    kinds = {r["benchmark"] for r in runs}
    if len(kinds) != 1:
        sys.exit(f"plot_bench.py: the files mix benchmarks {sorted(kinds)}; give one collective at a time")
    return runs


def medians(runs, dtype, redop, place):
    """{ranks: {backend: {size: median busbw}}} with backends in table order, and each backend's baseline,
    over the selected rows."""
    samples = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    baselines = {}
    for run in runs:
        for column in run["columns"]:
            baselines[column["backend"]] = column["baseline"]
            samples[run["ranks"]][column["backend"]]  # the table's column order, not the results' key order
        for row in run["rows"]:
            if row["dtype"] != dtype or row["redop"] != redop or row["in_place"] != (place == "in"):
                continue
            for backend, m in row["results"].items():
                samples[run["ranks"]][backend][row["size_bytes"]].append(m["busbw_gbs"])
    if not any(sizes for by_backend in samples.values() for sizes in by_backend.values()):
        sys.exit(f"plot_bench.py: no rows with dtype {dtype}, redop {redop}, place {place}")
    result = {ranks: {b: {s: statistics.median(v) for s, v in sizes.items()} for b, sizes in by_backend.items()}
              for ranks, by_backend in samples.items()}
    counts = {ranks: max(len(v) for sizes in by_backend.values() for v in sizes.values())
              for ranks, by_backend in samples.items()}
    return result, baselines, counts


def size_label(size):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


def plot_collective(args):
    runs = load(args.json)
    kind = runs[0]["benchmark"]
    place = args.place or ("in" if kind == "broadcast" else "out")
    redop = args.redop or ("sum" if kind in ("allreduce", "reducescatter") else "none")
    data, _, counts = medians(runs, args.dtype, redop, place)
    with tempfile.TemporaryDirectory() as tmp:
        plots = []
        for ranks in sorted(data):
            for backend in data[ranks]:
                path = f"{tmp}/{ranks}_{backend}.dat"
                with open(path, "w") as f:
                    for size in sorted(data[ranks][backend]):
                        f.write(f"{size} {data[ranks][backend][size]}\n")
                title = f"{backend}, {ranks} ranks"
                plots.append(f"'{path}' using 1:2 with linespoints title '{title}'")
        sizes = sorted({size for by_backend in data.values() for per_size in by_backend.values() for size in per_size})
        every = max(1, (len(sizes) + 12) // 13)  # about a dozen labels at most
        xtics = ", ".join(f'"{size_label(size)}" {size}' for size in sizes[::every])
        runs_note = ", ".join(f"{r} ranks: median of {counts[r]} runs" for r in sorted(counts))
        script = f"""
set terminal pngcairo size 1000,600 font 'sans,11'
set output '{args.out}'
set title "accel bench {kind}: busbw, {args.dtype} {redop}, {place} of place ({runs_note})"
set logscale x 2
set offsets graph 0.03, graph 0.03, 0, 0
set xtics ({xtics})
set xlabel 'message size (bytes)'
set ylabel 'busbw (GB/s)'
set key top left
set grid
plot {', '.join(plots)}
"""
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    print(f"plot_bench.py: wrote {args.out}")


def print_table(args):
    runs = load(args.json)
    kind = runs[0]["benchmark"]
    place = args.place or ("in" if kind == "broadcast" else "out")
    redop = args.redop or ("sum" if kind in ("allreduce", "reducescatter") else "none")
    data, baselines, counts = medians(runs, args.dtype, redop, place)
    for ranks in sorted(data):
        backends = list(data[ranks])
        ratios = [b for b in backends if baselines.get(b)]
        print(f"\n{kind}, {ranks} ranks, {args.dtype} {redop}, {place} of place: median busbw (GB/s) of "
              f"{counts[ranks]} runs\n")
        print("| size | " + " | ".join(backends) + " | " + " | ".join(f"{b} / {baselines[b]}" for b in ratios) + " |")
        print("|---:|" + "---:|" * (len(backends) + len(ratios)))
        for size in sorted(data[ranks][backends[0]]):
            cells = [f"{data[ranks][b][size]:.3f}" for b in backends]
            cells += [f"{data[ranks][b][size] / data[ranks][baselines[b]][size]:.2f}"
                      if data[ranks][baselines[b]][size] > 0 else "-" for b in ratios]
            print(f"| {size_label(size)} | " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("precision")
    p.add_argument("out", help="the PNG to write")
    p.add_argument("json", help="an accel bench precision --json file")
    p.add_argument("--device", default=None, help="which device's rows (default: the first)")
    for name in ("collective", "table"):
        p = sub.add_parser(name)
        if name == "collective":
            p.add_argument("out", help="the PNG to write")
        p.add_argument("json", nargs="+", help="accel bench --json files")
        p.add_argument("--dtype", default="f32")
        p.add_argument("--redop", default=None)
        p.add_argument("--place", choices=("out", "in"), default=None)
    args = parser.parse_args()
    if args.command == "precision":
        plot_precision(args)
    elif args.command == "collective":
        plot_collective(args)
    else:
        print_table(args)


if __name__ == "__main__":
    main()
