r"""Pólya-Gamma Gibbs sampling of a Bernoulli-logit model on a fixed basis.

The model (:func:`bayeskern.models.hsgp.hsgp_classification` is one) is

.. math:: f = \Psi w,\quad w \sim N(0, D(\theta)),\quad \theta \sim p(\theta),\quad
          y_i \sim \mathrm{Bernoulli}(\sigma(f_i)),

with fixed features :math:`\Psi` (:math:`N \times P`: a column of ones for the bias, then
the Hilbert-space basis) and a diagonal prior :math:`D(\theta)` that carries the kernel. With
Pólya-Gamma variables :math:`\omega_i \sim PG(1, f_i)` the likelihood becomes Gaussian in
:math:`w`, :math:`p(y, \omega \mid w) \propto \exp(\kappa^\top\Psi w -
\tfrac12 w^\top\Psi^\top\Omega\Psi w)`, :math:`\kappa = y - \tfrac12` (Polson, Scott & Windle
2013). One sweep draws

1. :math:`\omega \mid w`: exact :math:`PG(1, \Psi w)` draws (:func:`bayeskern.random.polya_gamma`);
2. :math:`\theta \mid \omega` with :math:`w` integrated out (the model's factor, the
   evidence :math:`\tfrac12 c^\top(A + D^{-1})^{-1}c - \tfrac12\log|I + D^{1/2}AD^{1/2}|` with
   :math:`A = \Psi^\top\Omega\Psi`, :math:`c = \Psi^\top\kappa`): random-walk
   Metropolis steps in NumPyro's unconstrained space, the proposal's covariance adapted
   during warm-up (Haario et al. 2001) and then fixed;
3. :math:`w \mid \theta, \omega \sim N\big((A + D^{-1})^{-1}c,\ (A + D^{-1})^{-1}\big)`.

Steps 2-3 draw :math:`(\theta, w)` jointly given :math:`\omega` (a collapsed Gibbs step), so
the hyper-parameters do not wait on the weights. The data enter a sweep through
:math:`\Psi w` and :math:`\Psi^\top\Omega\Psi` (:math:`O(NP^2)`); each Metropolis step is one
:math:`P \times P` Cholesky factorization, whatever :math:`N`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax
from jax.flatten_util import ravel_pytree
from numpyro.infer import init_to_uniform
from numpyro.infer.util import potential_energy

from bayeskern import diagnostics
from bayeskern import random as bkr
from bayeskern.inference.nuts import AUTO_BLOCK, AUTO_MAX_SAMPLES, stop_attrs
from bayeskern.inference.start import as_key, model_functions
from bayeskern.models.hsgp import scaled_factor

__all__ = ["PGBasisGibbs", "PGBasisState", "gaussian_weights", "run_pg_basis"]

#: Metropolis steps on the hyper-parameters per sweep (each one P x P factorization)
MH_STEPS = 12
#: the acceptance rate the warm-up tunes the proposal's scale to (Gelman et al. 1996)
TARGET_ACCEPT = 0.3


class PGBasisState(NamedTuple):
    """One chain's state.

    Unconstrained hyper-parameters ``u`` (flat), weights ``w`` (bias first), the proposal
    (Cholesky factor ``chol`` times ``exp(log_scale)``) and the running moments of ``u`` that
    the warm-up estimates it from.
    """

    key: jax.Array
    u: jax.Array
    w: jax.Array
    log_scale: jax.Array
    chol: jax.Array
    mean: jax.Array
    m2: jax.Array
    count: jax.Array


def gaussian_weights(key, A, c, d):
    r"""Draw the weights given the Pólya-Gamma variables and the hyper-parameters.

    :math:`w \sim N\big((A + D^{-1})^{-1}c,\ (A + D^{-1})^{-1}\big)`, :math:`D =
    \mathrm{diag}(d)`. In the scaled form :math:`B = I + D^{1/2}AD^{1/2} = LL^\top`
    (:func:`bayeskern.models.hsgp.scaled_factor`):
    :math:`w = D^{1/2}L^{-\top}(L^{-1}D^{1/2}c + \varepsilon)`,
    :math:`\varepsilon \sim N(0, I)`, whose covariance is :math:`D^{1/2}B^{-1}D^{1/2} =
    (A + D^{-1})^{-1}`.
    """
    L, r = scaled_factor(A, d)
    u = jsl.solve_triangular(L, r * c, lower=True)
    eps = jax.random.normal(key, u.shape, u.dtype)
    return r * jsl.solve_triangular(L, u + eps, lower=True, trans=1)


def _sweep(i, state: PGBasisState, Psi, kappa_stats, log_target, variances, num_warmup):
    """One sweep (module docstring) and, while ``i < num_warmup``, one adaptation step."""
    key, k_pg, k_w, k_mh = jax.random.split(state.key, 4)
    omega = bkr.polya_gamma(k_pg, Psi @ state.w)
    A = Psi.T @ (omega[:, None] * Psi)

    def mh(carry, k):
        u, lp, acc = carry
        k1, k2 = jax.random.split(k)
        prop = u + jnp.exp(state.log_scale) * (state.chol @ jax.random.normal(k1, u.shape, u.dtype))
        lp_prop = log_target(prop, A, kappa_stats)
        ok = jnp.log(jax.random.uniform(k2, dtype=u.dtype)) < lp_prop - lp
        ok = ok & jnp.isfinite(lp_prop)
        return (jnp.where(ok, prop, u), jnp.where(ok, lp_prop, lp), acc + ok), None

    lp0 = log_target(state.u, A, kappa_stats)
    (u, _, n_acc), _ = lax.scan(
        mh, (state.u, lp0, jnp.zeros((), state.u.dtype)), jax.random.split(k_mh, MH_STEPS)
    )
    accept = n_acc / MH_STEPS
    w = gaussian_weights(k_w, A, kappa_stats, variances(u))

    # warm-up: Robbins-Monro on the log scale throughout; the covariance of u estimated over
    # the second quarter and used from the half-way sweep on (then fixed)
    warm = i < num_warmup
    log_scale = state.log_scale + jnp.where(warm, (accept - TARGET_ACCEPT) / jnp.sqrt(i + 1.0), 0.0)
    collect = warm & (i >= num_warmup // 4) & (i < num_warmup // 2)
    count = state.count + collect
    delta = u - state.mean
    mean = jnp.where(collect, state.mean + delta / jnp.maximum(count, 1), state.mean)
    m2 = jnp.where(collect, state.m2 + jnp.outer(delta, u - mean), state.m2)
    switch = warm & (i == num_warmup // 2) & (count > u.shape[0] + 1)
    dim = u.shape[0]
    cov = m2 / jnp.maximum(count - 1, 1) + 1e-8 * jnp.eye(dim, dtype=u.dtype)
    chol = jnp.where(switch, jnp.linalg.cholesky(cov), state.chol)
    log_scale = jnp.where(switch, jnp.log(2.38 / jnp.sqrt(dim)), log_scale)
    new = PGBasisState(key, u, w, log_scale, chol, mean, m2, count)
    return new, dict(u=u, w=w, accept=accept, omega_mean=jnp.mean(omega))


class PGBasisGibbs:
    r"""Chains of the Pólya-Gamma Gibbs sampler (module docstring), advanced block by block.

    One compiled program advances every chain (batched with ``vmap``) by ``block`` sweeps
    from a given sweep index, so the warm-up, the draws and any further draws
    (``num_samples="auto"``) share one compilation.

    Parameters
    ----------
    model : NumPyro model
        Called as ``model(stats=(A, c), **model_kwargs)``: its log density (the sampled sites,
        the evidence as a factor) is the Metropolis target of the hyper-parameters.
    model_kwargs : dict
    transforms : dict
        Site name -> bijection from NumPyro's unconstrained space to the site's support.
    variances : callable
        Constrained site values (dict) -> the prior variances :math:`d` of :math:`w`, ``(P,)``.
    example : dict
        Unconstrained values of the sites for one chain (their shapes).
    num_warmup : int
        Sweeps of adaptation; sweeps from this index on are draws.
    block : int
        Sweeps per compiled call.
    """

    def __init__(self, model, model_kwargs, transforms, variances, example, num_warmup, block):
        flat, self._unravel = ravel_pytree(example)
        self.dim, self.num_warmup, self.block = flat.shape[0], int(num_warmup), int(block)
        self._transforms = transforms

        def log_target(u, A, c):
            return -potential_energy(model, (), dict(model_kwargs, stats=(A, c)), self._unravel(u))

        def chain(state, i0, Psi, c):
            step = functools.partial(
                _sweep,
                Psi=Psi,
                kappa_stats=c,
                log_target=log_target,
                variances=lambda u: variances(self.constrain(u)),
                num_warmup=self.num_warmup,
            )
            return lax.scan(lambda s, i: step(i, s), state, i0 + jnp.arange(self.block))

        self._advance = jax.jit(jax.vmap(chain, in_axes=(0, None, None, None)))

    def constrain(self, u):
        """Constrained site values (dict) of a flat unconstrained vector."""
        return {k: self._transforms[k](v) for k, v in self._unravel(u).items()}

    def init(self, key, starts: dict, n_features: int, dtype) -> PGBasisState:
        """Return initial states: ``starts`` (unconstrained, one per chain), zero weights."""
        u0 = jax.vmap(lambda s: ravel_pytree(s)[0])(starts)
        n, dim = u0.shape
        return PGBasisState(
            jax.random.split(key, n),
            u0.astype(dtype),
            jnp.zeros((n, n_features), dtype),
            jnp.full((n,), np.log(0.1), dtype),
            jnp.broadcast_to(jnp.eye(dim, dtype=dtype), (n, dim, dim)),
            jnp.zeros((n, dim), dtype),
            jnp.zeros((n, dim, dim), dtype),
            jnp.zeros((n,), jnp.int32),
        )

    def advance(self, states: PGBasisState, i0: int, Psi, kappa_stats):
        """Advance every chain by ``block`` sweeps from sweep ``i0``.

        Returns ``(states, out)``: ``out`` holds ``u`` (flat, unconstrained), ``w``, ``accept``
        and ``omega_mean`` per chain and sweep, ``(chain, block, ...)``.
        """
        return self._advance(states, jnp.asarray(i0), Psi, kappa_stats)


def run_pg_basis(
    model,
    model_kwargs: dict,
    Psi,
    y,
    variances,
    *,
    rng_key,
    num_warmup: int,
    num_samples,
    num_chains: int,
    dims=None,
    coords=None,
    observed=None,
    max_samples: int = AUTO_MAX_SAMPLES,
):
    r"""Run :class:`PGBasisGibbs` chains and return their draws as ``InferenceData``.

    The chains start where NumPyro's ``init_to_uniform`` puts the hyper-parameters (one
    start per chain), with zero weights. ``num_samples="auto"``: blocks of
    :data:`~bayeskern.inference.AUTO_BLOCK` sweeps per chain after the warm-up until
    every posterior variable meets :func:`bayeskern.diagnostics.convergence_report`'s
    R-hat and ESS criteria, at most ``max_samples``, or until they are projected to miss them
    at the cap (:func:`bayeskern.diagnostics.auto_stop`, as :func:`~bayeskern.inference.run_nuts`).

    Parameters
    ----------
    model, model_kwargs, variances
        As :class:`PGBasisGibbs`.
    Psi : (N, P) array
        Features, the bias column first.
    y : (N,) array of 0/1
    rng_key : int or JAX key
    num_warmup, num_samples, num_chains
        Sweeps of adaptation, sweeps kept per chain (or ``"auto"``), chains.
    dims, coords, observed
        Passed to :func:`bayeskern.diagnostics.from_samples` and ``observed_data``.

    Returns
    -------
    InferenceData
        ``posterior``: the model's sites, ``bias`` and ``weights`` (the basis weights
        :math:`w`); ``sample_stats``: ``accept_rate`` (the hyper-parameters' Metropolis
        acceptance in the sweep) and ``omega_mean``.
    """
    auto = isinstance(num_samples, str)
    key, k_start, k_run = jax.random.split(as_key(rng_key), 3)
    Psi = jnp.asarray(Psi)
    P, dtype = Psi.shape[1], Psi.dtype
    kappa_stats = Psi.T @ (jnp.asarray(y, dtype) - 0.5)
    # the starts need the model's sites only: any (A, c) of the right shapes
    start_stats = (jnp.eye(P, dtype=dtype), jnp.zeros(P, dtype))
    functions = model_functions(
        model,
        dict(model_kwargs, stats=start_stats),
        jax.random.split(k_start, num_chains),
        init_to_uniform,
    )
    sampler = PGBasisGibbs(
        model,
        model_kwargs,
        functions.transforms,
        variances,
        jax.tree.map(lambda a: a[0], functions.starts),
        num_warmup,
        AUTO_BLOCK,
    )
    state = sampler.init(k_run, functions.starts, P, dtype)
    target = num_warmup + (min(AUTO_BLOCK, max_samples) if auto else num_samples)
    done, blocks, stopped = 0, [], None
    while True:
        while done < target:
            state, out = sampler.advance(state, done, Psi, kappa_stats)
            blocks.append(jax.tree.map(np.asarray, out))
            done += AUTO_BLOCK
        out = jax.tree.map(lambda *b: np.concatenate(b, axis=1), *blocks)
        blocks = [out]
        kept = slice(num_warmup, target)
        draws = jax.vmap(jax.vmap(sampler.constrain))(jnp.asarray(out["u"][:, kept]))
        samples = {k: np.asarray(v) for k, v in draws.items()}
        samples["bias"] = out["w"][:, kept, 0]
        samples["weights"] = out["w"][:, kept, 1:]
        stats = {"accept_rate": out["accept"][:, kept], "omega_mean": out["omega_mean"][:, kept]}
        idata = diagnostics.from_samples(samples, sample_stats=stats, dims=dims, coords=coords)
        taken = target - num_warmup
        if not auto or (stopped := diagnostics.auto_stop(idata, taken, max_samples)):
            break
        target = num_warmup + min(taken + AUTO_BLOCK, max_samples)
    for name, value in samples.items():
        if not np.all(np.isfinite(value)):
            raise FloatingPointError(
                f"the Polya-Gamma Gibbs sampler produced non-finite values in {name!r}"
            )
    if observed:
        diagnostics.add_group(
            idata, "observed_data", observed, dims=dims, coords=coords, sample_dims=False
        )
    diagnostics.set_attrs(
        idata,
        sampler="Polya-Gamma Gibbs (basis weights), random-walk Metropolis (hyper-parameters)",
        num_warmup=num_warmup,
        num_samples=taken,
        num_samples_requested=str(num_samples),
        **stop_attrs(stopped, max_samples, taken),
        num_chains=num_chains,
        mh_steps_per_sweep=MH_STEPS,
        mean_accept_rate=float(np.mean(stats["accept_rate"])),
    )
    return idata
