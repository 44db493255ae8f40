"""The ``bayeskde`` command.

``bayeskde demo`` runs the main job on the embedded S-shape data: NUTS learns the
kernel transform degrees and bandwidths (:mod:`bayeskde.apps.demo`), with progress
bars, a printed summary beside the deterministic baselines, and InferenceData
(.nc), PNG plots and JSON written to ``--out``. ``bayeskde strings`` runs the
strings-to-strings reproduction of Weston et al. (2002, section 4.1, Table 1).
Both keep their compiled programs in JAX's persistent compilation cache
(:func:`bayeskde.enable_compilation_cache`; ``--no-cache`` to skip it).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _precision(args) -> None:
    import jax

    if getattr(args, "float64", False) or not getattr(args, "float32", True):
        jax.config.update("jax_enable_x64", True)


def _cache(args) -> None:
    if args.cache:
        from .cache import enable_compilation_cache

        enable_compilation_cache(args.cache_dir)


def _demo(args) -> int:
    from .cache import quiet_cache_logs

    with quiet_cache_logs():
        return _demo_body(args)


def _demo_body(args) -> int:
    _precision(args)
    _cache(args)
    from .apps.demo import (
        format_sshape_summary,
        run_sshape_demo,
        write_sshape_outputs,
    )

    print(f"bayeskde demo: Bayesian kernel learning on the S-shape data (seed "
          f"{args.seed}{', quick' if args.quick else ''}; float"
          f"{32 if args.float32 else 64})", flush=True)
    result, fit, pred, arrays = run_sshape_demo(args.seed, quick=args.quick)
    print(format_sshape_summary(result))
    paths = write_sshape_outputs(result, fit, pred, arrays, args.out)
    print("saved " + ", ".join(str(p) for p in paths))
    return 0


def _strings(args) -> int:
    from .cache import quiet_cache_logs

    with quiet_cache_logs():
        return _strings_body(args)


def _strings_body(args) -> int:
    _precision(args)
    _cache(args)
    import jax

    from .apps.strings import (
        format_strings_summary,
        plot_strings_experiment,
        run_strings_experiment,
    )

    quick = dict(n_samples=80, max_outer=2, ks=tuple(range(1, 11))) if args.quick \
        else {}
    print(f"bayeskde strings: KDE vs k-NN, strings to strings (seed {args.seed}, "
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
    demo = sub.add_parser(
        "demo", help="Bayesian kernel learning on the embedded S-shape data")
    strings = sub.add_parser(
        "strings", help="the strings-to-strings KDE reproduction (Table 1)")
    for p, default in ((demo, "bayeskde-demo"), (strings, "bayeskde-strings")):
        p.add_argument("--out", default=default,
                       help=f"folder for the results (default {default})")
        p.add_argument("--seed", type=int, default=0, help="data seed (default 0)")
        p.add_argument("--quick", action="store_true", help="a smaller, faster run")
        p.add_argument(
            "--cache", action=argparse.BooleanOptionalAction, default=True,
            help="keep compiled programs on disk so that the next run skips "
            "compilation (JAX's persistent compilation cache; default on, "
            "--no-cache turns it off)")
        p.add_argument("--cache-dir", default=None,
                       help="the cache folder (default $BAYESKDE_CACHE_DIR or "
                       "~/.cache/bayeskde/jax)")
    demo.add_argument("--float32", action="store_true",
                      help="compute in float32 (default float64: the published GP "
                      "ridge 1e-5 and the GP evidence need it)")
    strings.add_argument("--float64", action="store_true",
                         help="compute in float64 (default: JAX's float32)")
    strings.add_argument("--mode", choices=("mean", "sum", "exact"), default="mean",
                         help="string kernel lengths (default mean)")
    args = parser.parse_args(argv)
    return _demo(args) if args.command == "demo" else _strings(args)


if __name__ == "__main__":
    raise SystemExit(main())
