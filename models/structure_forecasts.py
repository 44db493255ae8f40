"""Forecasts from the posterior over kernel structure beside their peers: the
benchmark table of ``bench/structure.py`` (issue 42).

``bench/structure.py`` forecasts Mauna Loa CO2, AirPassengers and ten more of R's
series beside AutoETS, AutoARIMA (statsforecast), gallifrey (AutoGP's SMC) and
scikit-learn's GP with the hand-designed Mauna Loa kernel and with one SE kernel;
the peers run from their own environment. This recipe prints that run's table:

    python models/structure_forecasts.py --results bench_structure.jsonl \\
        [--gallifrey-results gallifrey.jsonl]

reads the JSON lines the bench printed (``python bench/structure.py >
bench_structure.jsonl``; gallifrey's from ``bench/structure_gallifrey.py``) and
prints the markdown table, per series the ratio of our CRPS to the best peer's,
and their median. ``--run`` runs the bench first (it needs the peers'
environment, ``--peer-python``). ``--quick`` needs no peer: it forecasts a
planted monthly series (trend, yearly cycle, noise; 60 months, the last 6 held
out) with a small grammar beside scikit-learn's one-SE GP, in the bench's row
format, and prints the same table.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _common import enable_x64, parse_args, write_json

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "bench_structure", ROOT / "bench" / "structure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _add_arguments(parser):
    parser.add_argument("--results", nargs="+", default=None,
                        help="JSON lines printed by bench/structure.py")
    parser.add_argument("--gallifrey-results", default=None,
                        help="JSON lines printed by bench/structure_gallifrey.py")
    parser.add_argument("--run", action="store_true",
                        help="run bench/structure.py first (its peers' environment)")
    parser.add_argument("--peer-python",
                        default="/work/venvs/structure-bench/bin/python")


def quick_rows(seed: int) -> list[dict]:
    """Ours and scikit-learn's one-SE GP on a planted monthly series."""
    import jax

    bench = _bench()
    rng = np.random.default_rng(seed)
    t = 2000 + np.arange(60) / 12
    y = 10 + 0.8 * (t - 2000) + np.sin(2 * np.pi * t) + 0.2 * rng.normal(size=60)
    k = 54
    t_tr, y_tr, t_te, y_te = t[:k], y[:k], t[k:], y[k:]
    rows = []
    start, cpu = time.perf_counter(), time.process_time()
    mean, sd, _ = bench._sklearn("sklearn_se", t_tr, y_tr, t_te, 12)
    rows.append({"method": "sklearn_se", "seconds": time.perf_counter() - start,
                 "cpu_seconds": time.process_time() - cpu,
                 **bench._gaussian_scores(mean, sd, y_te)})

    from bayeskde.structure import (
        StructureGPRegressor,
        mixture_crps,
        mixture_mean,
    )

    model = StructureGPRegressor(terms=("LIN", "SE", "PER"), max_terms=2,
                                 num_starts=2, num_steps=20, transform="none",
                                 key=jax.random.key(seed))
    start, cpu = time.perf_counter(), time.process_time()
    model.fit(t_tr, y_tr)
    pred = model.predict_distribution(t_te)
    lo, hi = model.predict_interval(t_te, 0.9)
    top = model.structure_posterior_
    rows.append({"method": "ours", "seconds": time.perf_counter() - start,
                 "cpu_seconds": time.process_time() - cpu,
                 "rmse": float(np.sqrt(np.mean((mixture_mean(pred) - y_te) ** 2))),
                 "crps": float(np.mean(mixture_crps(pred, y_te))),
                 "lpd": model.score(t_te, y_te),
                 "coverage90": float(np.mean((y_te >= lo) & (y_te <= hi))),
                 "transform": "none",
                 "top": [[top.expressions[0], float(top.probabilities[0])]]})
    for r in rows:
        r.update({"series": "planted", "n_train": k, "horizon": 60 - k})
    return rows


def main(argv=None):
    args = parse_args("structure_forecasts", __doc__.split("\n")[0],
                      _add_arguments, argv)
    bench = _bench()
    if args.quick:
        rows = quick_rows(args.seed)
    else:
        paths = list(args.results or [])
        if args.run:
            out = Path(args.out).with_suffix(".jsonl")
            out.parent.mkdir(parents=True, exist_ok=True)
            with open(out, "w") as f:
                subprocess.run([sys.executable, str(ROOT / "bench" / "structure.py"),
                                "--peer-python", args.peer_python], stdout=f,
                               check=True)
            paths.append(str(out))
        if not paths:
            raise SystemExit("give --results FILE (bench/structure.py's output), "
                             "--run, or --quick")
        rows = bench._merge(paths, args.gallifrey_results)
    table, ratios = bench.markdown_table(rows)
    print(table)
    write_json(args.out, {"rows": rows, "crps_ratio_to_best_peer": ratios,
                          "median_ratio": float(np.median(list(ratios.values())))})
    print(json.dumps({"written": str(args.out)}))


if __name__ == "__main__":
    enable_x64()
    main()
