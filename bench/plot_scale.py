#!/usr/bin/env python
"""The scale curve: bench_scale.py results of several sizes as one JSON and one plot.

Reads the JSON of ``bench/bench_scale.py`` runs (one per size, same data kind), and for
each system and metric -- insert rec/s, reopen s, query p50 ms, filtered (10%) warm p50
ms, peak RSS MiB (the larger of build and reopen), disk MiB -- takes the measured points,
fits the slope of the last two in log-log space and extrapolates to the sizes no run
measured (10M always; 1M for a system a run skipped, e.g. Chroma), the slope held between
0 and 1 for costs and between -1 and 0 for the insert rate. Extrapolated points are
flagged ``"extrapolated": true`` in the JSON and drawn hollow on dashed lines in the plot.
Needs matplotlib for the plot (``pip install -r bench/requirements.txt``)::

    python bench/plot_scale.py /tmp/scale_10k.json /tmp/scale_100k.json /tmp/scale_1m.json \\
        --json docs/assets/scale_curve.json --png docs/assets/scale_curve.png
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any, Callable

SIZES = [10_000, 100_000, 1_000_000, 10_000_000]
SYSTEMS = ["memcore:exact", "memcore:faiss", "raw:numpy", "raw:faiss", "chroma", "lancedb"]
LABELS = {
    "memcore:exact": "memcore exact",
    "memcore:faiss": "memcore faiss HNSW32",
    "raw:numpy": "raw numpy",
    "raw:faiss": "raw faiss HNSW32",
    "chroma": "Chroma",
    "lancedb": "LanceDB (flat)",
}


def _peak(entry: dict[str, Any]) -> float | None:
    values = [entry.get("build", {}).get("peak_rss_mib"), entry.get("median", {}).get("peak_rss_mib")]
    values = [v for v in values if isinstance(v, (int, float))]
    return max(values) if values else None


METRICS: dict[str, tuple[str, Callable[[dict[str, Any]], float | None]]] = {
    "insert_rec_s": ("insert, records/s", lambda e: e.get("build", {}).get("insert_rec_s")),
    "reopen_s": ("reopen (open + first query), s", lambda e: e.get("median", {}).get("reopen_s")),
    "query_p50_ms": ("query p50, ms", lambda e: e.get("median", {}).get("query_p50_ms")),
    "filtered_10_p50_ms": ("filtered 10% p50, ms", lambda e: e.get("median", {}).get("filtered_10%", {}).get("warm_p50_ms")),
    "peak_rss_mib": ("peak RSS, MiB", _peak),
    "disk_mib": ("disk, MiB", lambda e: e.get("disk_mib")),
}


def curve(points: dict[int, float], bounds: tuple[float, float] = (0.0, 1.0)) -> list[dict[str, Any]]:
    """The measured points plus the sizes of :data:`SIZES` past them, extrapolated along
    the log-log slope of the last two measured points (one point: nothing extrapolated),
    the slope held within ``bounds``: a cost grows at most linearly with the size and does
    not shrink, a rate does not grow (a busy machine makes two points say otherwise)."""
    out = [{"n": n, "value": v, "extrapolated": False} for n, v in sorted(points.items())]
    if len(points) < 2:
        return out
    (n1, v1), (n2, v2) = sorted(points.items())[-2:]
    if v1 <= 0 or v2 <= 0:
        return out
    measured = math.log(v2 / v1) / math.log(n2 / n1)
    slope = min(max(measured, bounds[0]), bounds[1])
    for n in SIZES:
        if n > n2:
            out.append(
                {"n": n, "value": round(v2 * (n / n2) ** slope, 4), "extrapolated": True, "slope": round(slope, 3), "measured_slope": round(measured, 3)}
            )
    return out


def build(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Curves of every system and metric from the runs' results."""
    curves: dict[str, dict[str, Any]] = {}
    for system in SYSTEMS:
        for metric, (_, read) in METRICS.items():
            points = {}
            for result in results:
                entry = result.get("systems", {}).get(system)
                value = read(entry) if isinstance(entry, dict) and "build" in entry and "error" not in entry["build"] else None
                if isinstance(value, (int, float)) and value > 0:
                    points[int(result["params"]["n"])] = float(value)
            if points:
                curves.setdefault(system, {})[metric] = curve(points, (-1.0, 0.0) if metric == "insert_rec_s" else (0.0, 1.0))
    runs = [
        {
            "n": r["params"]["n"],
            "data": r["params"]["data"],
            "command": r["command"],
            "loadavg": [r["environment"].get("loadavg_at_start"), r["environment"].get("loadavg_at_end")],
            "started_at": r["environment"].get("started_at"),
        }
        for r in results
    ]
    return {"runs": runs, "curves": curves}


def plot(data: dict[str, Any], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    colours = dict(zip(SYSTEMS, ["tab:blue", "tab:orange", "tab:cyan", "tab:olive", "tab:red", "tab:green"]))
    for ax, (metric, (title, _)) in zip(axes.ravel(), METRICS.items()):
        for system in SYSTEMS:
            points = data["curves"].get(system, {}).get(metric)
            if not points:
                continue
            measured = [p for p in points if not p["extrapolated"]]
            colour = colours[system]
            ax.plot([p["n"] for p in measured], [p["value"] for p in measured], "o-", color=colour, label=LABELS[system])
            guessed = [p for p in points if p["extrapolated"]]
            if guessed:
                tail = [measured[-1], *guessed]
                ax.plot([p["n"] for p in tail], [p["value"] for p in tail], "--", color=colour)
                ax.plot([p["n"] for p in guessed], [p["value"] for p in guessed], "o", color=colour, markerfacecolor="white")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(SIZES, ["10k", "100k", "1M", "10M"])
        ax.set_title(title)
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    kinds = sorted({r["data"] for r in data["runs"]})
    fig.suptitle(f"memcore and peers by size ({', '.join(kinds)} x 384): filled = measured, hollow on dashes = extrapolated from the last measured slope")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=90)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+", type=Path, help="bench_scale.py JSON outputs, one per size")
    p.add_argument("--json", type=Path, required=True, help="where the curves go")
    p.add_argument("--png", type=Path, help="where the plot goes (needs matplotlib)")
    args = p.parse_args()
    data = build([json.loads(path.read_text()) for path in args.results])
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(data, indent=1) + "\n")
    if args.png is not None:
        plot(data, args.png)


if __name__ == "__main__":
    main()
