"""Time the structure posterior's fit: the first call (compilation and run) and a
second call of the same shapes with another key (run only), in CPU seconds of
this process and wall seconds, on a planted monthly series of ``n`` points
(trend, yearly cycle, noise). Prints one JSON object per call.

Usage::

    taskset -c 1 python bench/structure_speed.py --n 65 [--num-starts 3]
        [--num-steps 60] [--transform none]

CPU seconds are the fairer number on a shared machine (wall seconds count the
other processes' time slices too). Above ``screen_above`` (300) points the fit
screens its structures on the last 64 points first (``screen`` in the output:
the structures kept for the whole series).
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import numpy as np

from bayeskde.structure import fit_structure_gp, structure_table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=65)
    parser.add_argument("--num-starts", type=int, default=3)
    parser.add_argument("--num-steps", type=int, default=60)
    parser.add_argument("--max-terms", type=int, default=3)
    parser.add_argument("--transform", default="none")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    t = 1974 + np.arange(args.n) / 12
    y = (2000 + 500 * np.sin(2 * np.pi * t) - 20 * (t - 1974)
         + 100 * rng.normal(size=args.n))
    for rep in range(args.repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        post = fit_structure_gp(jax.random.key(rep), t, y, max_terms=args.max_terms,
                                num_starts=args.num_starts,
                                num_steps=args.num_steps, transform=args.transform)
        top = structure_table(post, 1)
        dtype = str(jax.numpy.result_type(float))
        print(json.dumps({"call": rep, "n": args.n, "dtype": dtype,
                          "cpu_seconds": round(time.process_time() - cpu, 2),
                          "wall_seconds": round(time.perf_counter() - wall, 2),
                          "structures": int(len(post.grammar.masks)),
                          "screen": post.screen, "transform": post.transform,
                          "num_starts": args.num_starts,
                          "num_steps": args.num_steps,
                          "top": [top.expressions[0],
                                  round(float(top.probabilities[0]), 3)]}),
              flush=True)


if __name__ == "__main__":
    main()
