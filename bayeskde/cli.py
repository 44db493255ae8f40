"""The ``bayeskde`` command.

``bayeskde demo`` runs the main job on an embedded data set: for now the
strings-to-strings reproduction of Weston et al. (2002, section 4.1, Table 1),
with a progress bar, a printed summary, a PNG figure and a JSON record.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _demo(args) -> int:
    import jax

    if args.float64:
        jax.config.update("jax_enable_x64", True)
    from .demo import (
        format_strings_summary,
        plot_strings_experiment,
        run_strings_experiment,
    )

    quick = dict(n_samples=80, max_outer=2, ks=tuple(range(1, 11))) if args.quick \
        else {}
    print(f"bayeskde demo: KDE vs k-NN, strings to strings (seed {args.seed}, "
          f"kernel mode {args.mode}{', quick' if args.quick else ''})", flush=True)
    res = run_strings_experiment(jax.random.key(args.seed), mode=args.mode, **quick)
    print(format_strings_summary(res))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig = plot_strings_experiment(res, out / "strings_to_strings.png")
    (out / "strings_to_strings.json").write_text(json.dumps(res, indent=2) + "\n")
    print(f"saved {fig} and {out / 'strings_to_strings.json'} "
          f"({res['runtime_s']:.1f} s)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bayeskde`` console script."""
    parser = argparse.ArgumentParser(
        prog="bayeskde", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the main job on the embedded data set")
    demo.add_argument("--out", default="bayeskde-demo",
                      help="folder for the figure and JSON (default bayeskde-demo)")
    demo.add_argument("--seed", type=int, default=0, help="data seed (default 0)")
    demo.add_argument("--mode", choices=("mean", "sum", "exact"), default="mean",
                      help="string kernel lengths (default mean)")
    demo.add_argument("--quick", action="store_true", help="a smaller, faster run")
    demo.add_argument("--float64", action="store_true",
                      help="compute in float64 (default: JAX's default float32)")
    args = parser.parse_args(argv)
    return _demo(args)


if __name__ == "__main__":
    raise SystemExit(main())
