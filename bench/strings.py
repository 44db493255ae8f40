"""Benchmark: subsequence-kernel Gram matrices, bayeskde against ``strkernels``.

The workload is the string toy of Weston et al. (2002), section 4.1: random strings
over ``abcd`` of length 10..15, the normalised kernel summed over subsequence
lengths 1..r with r = 3 and lam = 0.01, Gram matrix of a set with itself.

The peer is ``strkernels.SubsequenceStringKernel(maxlen=r, ssk_lambda=lam)`` (a C
port of Shogun's kernel, OpenMP over rows, lower triangle only when both arguments
are the same object). Its value is sum_{q=1..maxlen} K_q with the same
lam^(l(i) + l(j)) weights as eq. (4) and the same sqrt-diagonal normalisation
(featureless strings normalise to 0), i.e. bayeskde's ``mode="sum"`` with
``normalize=True``; no adaptation is needed and the script checks the values.

Prints one JSON line per size: ``bayeskde_s`` and ``peer_s`` are medians over
``--repeats`` runs; the first bayeskde call compiles and is timed separately
(``warmup_s``; ``compile_s`` is the warm-up minus the median run, 0 when an earlier
size already compiled the same block shape).

Usage: python bench/strings.py --sizes 200 2000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import numpy as np

from bayeskde.kernels.strings import DEFAULT_BLOCK_SIZE, subsequence_kernel


def make_strings(rng, n, alphabet="abcd", min_len=10, max_len=15):
    letters = np.array(list(alphabet))
    lengths = rng.integers(min_len, max_len + 1, size=n)
    return ["".join(letters[rng.integers(0, len(letters), m)]) for m in lengths]


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 2000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--r", type=int, default=3)
    parser.add_argument("--lam", type=float, default=0.01)
    parser.add_argument("--block-size", type=int, default=DEFAULT_BLOCK_SIZE)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from strkernels import SubsequenceStringKernel

    peer = SubsequenceStringKernel(maxlen=args.r, ssk_lambda=args.lam)
    rng = np.random.default_rng(args.seed)
    for size in args.sizes:
        X = make_strings(rng, size)

        def ours(X=X):
            K = subsequence_kernel(X, r=args.r, lam=args.lam, mode="sum",
                                   normalize=True, block_size=args.block_size)
            return np.asarray(K.block_until_ready())

        warmup_s, K = timed(ours)
        ours_s = statistics.median(timed(ours)[0] for _ in range(args.repeats))
        peer(X, X)  # loads the shared library
        peer_runs = [timed(lambda X=X: peer(X, X)) for _ in range(args.repeats)]
        peer_s = statistics.median(t for t, _ in peer_runs)
        K_peer = peer_runs[-1][1]
        print(json.dumps({
            "size": size,
            "bayeskde_s": round(ours_s, 4),
            "compile_s": round(max(warmup_s - ours_s, 0.0), 4),
            "warmup_s": round(warmup_s, 4),
            "peer_s": round(peer_s, 4),
            "ratio": round(peer_s / ours_s, 3),
            "max_abs_diff": float(np.abs(K.astype(np.float64) - K_peer).max()),
            "dtype": str(K.dtype),
            "block_size": args.block_size,
            "r": args.r,
            "lam": args.lam,
            "backend": jax.default_backend(),
        }), flush=True)


if __name__ == "__main__":
    main()
