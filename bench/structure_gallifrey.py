"""gallifrey (AutoGP's sequential Monte Carlo over kernel structures, in JAX) on
the series of ``bench/structure.py``, run in the peers' environment (it needs
jax < 0.6, so it never shares a process with bayeskde).

Reads a JSON list of ``{"name", "t", "y", "split"}`` on stdin and writes, per
series as it finishes, one JSON line ``{name: result}`` on stdout: the mixture
predictive's marginal components on the held-out times (means, standard
deviations of new observations, weights) and the wall and CPU seconds of fit and
forecast. ``bench/structure.py --gallifrey-results FILE`` reads those lines.

Defaults are AutoGP's tutorial's (the AirPassengers example of gallifrey's
documentation: 8 particles, a linear annealing schedule of 10 steps, 75 structure
moves and 10 HMC steps per step); the measured run used a smaller budget
(``--num-particles 4 --num-steps 5 --n-mcmc 20 --n-hmc 5``, already several
times our CPU time). Time is mapped to [0, 1] and y scaled by gallifrey's own
transforms, and the predictive is mapped back.

Usage (from bench/structure.py, or by hand)::

    /work/venvs/structure-bench/bin/python bench/structure_gallifrey.py < series.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


def forecast(name, t, y, k, num_particles, num_steps, n_mcmc, n_hmc, seed):
    import jax
    import jax.numpy as jnp
    from gallifrey.model import GPModel
    from gallifrey.schedule import LinearSchedule

    jax.config.update("jax_enable_x64", True)
    t = np.asarray(t, float)
    y = np.asarray(y, float)
    start, cpu = time.perf_counter(), time.process_time()
    key = jax.random.PRNGKey(seed)
    key, k_model, k_fit = jax.random.split(key, 3)
    model = GPModel(k_model, x=jnp.asarray(t[:k]), y=jnp.asarray(y[:k]),
                    num_particles=num_particles)
    schedule = LinearSchedule().generate(k, num_steps)
    final, _ = model.fit_smc(k_fit, annealing_schedule=schedule, n_mcmc=n_mcmc,
                             n_hmc=n_hmc, verbosity=0)
    model = model.update_state(final)
    x_new = model.x_transform.apply(jnp.asarray(t[k:]))
    dists = model.get_predictive_distributions(x_new)
    logw = np.asarray(final.log_weights, float)
    w = np.exp(logw - logw.max())
    w = w / w.sum()
    means, sds = [], []
    for d in dists:
        m = np.asarray(d.mean(), float)
        v = np.asarray(d.variance(), float)
        m, v = model.y_transform.unapply_mean_var(m, v)
        means.append(np.asarray(m, float).tolist())
        sds.append(np.sqrt(np.asarray(v, float)).tolist())
    return {"weights": w.tolist(), "means": means, "sds": sds,
            "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-particles", type=int, default=8)
    parser.add_argument("--num-steps", type=int, default=10)
    parser.add_argument("--n-mcmc", type=int, default=75)
    parser.add_argument("--n-hmc", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    # gallifrey pmaps over its particles: one XLA host device per particle (set
    # before jax is imported)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count="
                               f"{args.num_particles}")
    for rec in json.load(sys.stdin):
        res = forecast(rec["name"], rec["t"], rec["y"], rec["split"],
                       args.num_particles, args.num_steps, args.n_mcmc, args.n_hmc,
                       args.seed)
        res["settings"] = vars(args)
        print(json.dumps({rec["name"]: res}), flush=True)


if __name__ == "__main__":
    main()
