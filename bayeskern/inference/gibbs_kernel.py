"""The GaBaSR Gibbs sweep as a NumPyro ``MCMCKernel``, and its chain compiled once.

:class:`GaBaSRGibbs` wraps the sweep of :mod:`bayeskern.inference.gibbs_sweep` (BlackJAX's
shape: a ``NamedTuple`` state, ``init``, a pure ``sweep(key, state) -> (state, info)``) in
NumPyro's kernel interface, so that :class:`numpyro.infer.MCMC` can run it like any other
kernel; :func:`compiled_chain` is the same chain as one ``lax.scan``, compiled once per kernel,
settings and shapes, and :func:`run_chains` is the package's one driver of it (sequential or
batched chains, with or without a progress bar). The model and the sweep's steps are described in
:mod:`bayeskern.inference.gabasr_gibbs`, whose
:func:`~bayeskern.inference.gabasr_gibbs.gibbs_sample` runs them.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from numpyro.infer.mcmc import MCMCKernel
from tqdm.auto import tqdm

from bayeskern.inference.gibbs_sweep import (
    GibbsData,
    GibbsState,
    SweepConfig,
    _record,
    _sweep,
    init,
)
from bayeskern.models.gabasr import GibbsPrior

__all__ = ["GaBaSRGibbs", "GibbsMCMCState", "compiled_chain", "progress_block", "run_chains"]


class GibbsMCMCState(NamedTuple):
    """State of :class:`GaBaSRGibbs` as :class:`numpyro.infer.MCMC` carries it.

    ``draws`` (the ``sample_field``) holds what one sweep records (:func:`_record`);
    ``accept_rate``, ``accept_rate_v`` and ``drift`` are per-sweep statistics that
    ``MCMC.run(..., extra_fields=...)`` collects.
    """

    rng_key: jax.Array
    sampler: GibbsState
    data: GibbsData
    draws: dict
    accept_rate: jax.Array
    accept_rate_v: jax.Array
    drift: jax.Array


class GaBaSRGibbs(MCMCKernel):
    """The GaBaSR Gibbs/Metropolis-Hastings sweep as a NumPyro ``MCMCKernel``.

    It samples the paper's model (Pena-Llamas et al. 2023, sections 3.2 and eqs.
    10-11; parent BaNK, Oliva et al. 2016):

    .. math:: G \\sim \\mathrm{DP}(\\alpha, NIW(m_0, \\kappa_0, \\nu_0, \\Psi_0)),\\quad
              \\omega_j \\mid G \\sim \\int N(\\mu, \\Sigma)\\,dG,\\quad
              y \\mid \\Omega \\sim \\text{linear model on }
              \\Phi_\\Omega(x) = [\\cos(\\Omega x), \\sin(\\Omega x)]/\\sqrt M

    with the weights integrated out (normal-inverse-gamma evidence for regression,
    Polya-Gamma-augmented Gaussian evidence for classification).

    One :meth:`sample` call is one sweep of the paper's sampler (module docstring;
    Pena-Llamas et al. 2023, section 3.2): CRP assignments, normal-inverse-Wishart component draws,
    the DP concentration, independence-MH moves of every frequency with the weights integrated
    out, then the weight prior precision (and, for classification, Polya-Gamma variables
    and the weights). :class:`numpyro.infer.MCMC` drives it, so chains, ``num_warmup``
    (discarded sweeps), progress bars and ``az.from_numpyro`` work as for NUTS. The model
    is not a NumPyro function: it is the random-feature model with free frequencies drawn
    from a Dirichlet-process mixture (CRP form) of Pena-Llamas et al. (2023), given to
    :meth:`MCMC.run <numpyro.infer.MCMC.run>` as data: ``mcmc.run(key, X=X, y=y, mean_basis=B)``.

    Parameters
    ----------
    task : {"regression", "classification"}
        Regression: NIG evidence (eq. 10); classification: Bernoulli-logit (eq. 11) with
        Polya-Gamma augmentation.
    n_features : int
        Number of frequencies :math:`M` (:math:`M_1` when locally stationary).
    n_features_v : int, default 0
        :math:`M_2`, frequencies of the envelope :math:`\\kappa_1` (eq. 6); 0 for the
        stationary kernel.
    prior : GibbsPrior, optional
    evidence : {"rank", "full"}
        Rank-updated or recomputed evidence for each proposal (same chain, different cost).

    Examples
    --------
    >>> from numpyro.infer import MCMC
    >>> mcmc = MCMC(GaBaSRGibbs("regression", 16), num_warmup=5, num_samples=20)
    >>> mcmc.run(jax.random.PRNGKey(0), X=X, y=y)  # doctest: +SKIP
    >>> mcmc.get_samples()["log_marginal"]  # doctest: +SKIP
    """

    sample_field = "draws"

    def __init__(
        self,
        task: str = "regression",
        n_features: int = 250,
        *,
        n_features_v: int = 0,
        prior: GibbsPrior | None = None,
        evidence: str = "rank",
    ):
        if task not in ("regression", "classification"):
            raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
        for name, val, lo in (("n_features", n_features, 1), ("n_features_v", n_features_v, 0)):
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {val!r}")
        if evidence not in ("rank", "full"):
            raise ValueError(f"evidence must be 'rank' or 'full', got {evidence!r}")
        prior = GibbsPrior() if prior is None else prior
        if not isinstance(prior, GibbsPrior):
            raise TypeError(f"prior must be a GibbsPrior, got {type(prior).__name__}")
        self.config = SweepConfig(
            task, int(n_features), int(n_features_v), n_features_v > 0, prior, evidence
        )
        self.model = None  # no NumPyro model function: az.from_numpyro then skips the trace

    def __eq__(self, other):
        return type(other) is type(self) and other.config == self.config

    def __hash__(self):  # equal settings share compiled loops (compiled_chain)
        return hash((type(self), self.config))

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        """Return BaNK's initial state from ``model_kwargs`` ``X``, ``y`` (and ``mean_basis``)."""
        cfg = self.config
        k_init, k_run = jax.random.split(rng_key)
        st, data = _init_program(
            k_init,
            model_kwargs["X"],
            model_kwargs["y"],
            model_kwargs.get("mean_basis"),
            task=cfg.task,
            n_features=cfg.M,
            n_features_v=cfg.M2,
            prior=cfg.prior,
        )
        info = _sweep_info_shapes(cfg, k_run, st, data)
        info = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), info)
        return self._state(k_run, st, data, info)

    def _state(self, key, st, data, info):
        draws, stats = _record(st, info, self.config)
        zero = jnp.zeros((), stats["accept_rate"].dtype)
        return GibbsMCMCState(
            key,
            st,
            data,
            draws,
            stats["accept_rate"],
            stats.get("accept_rate_v", zero),
            stats["drift"],
        )

    def sample(self, state, model_args, model_kwargs):
        """One sweep (module docstring)."""
        key, sub = jax.random.split(state.rng_key)
        st, info = _sweep(self.config, sub, state.sampler, state.data)
        return self._state(key, st, state.data, info)


@functools.partial(jax.jit, static_argnames=("task", "n_features", "n_features_v", "prior"))
def _init_program(key, X, y, mean_basis, *, task, n_features, n_features_v, prior):
    """:func:`~bayeskern.inference.gibbs_sweep.init` as one compiled program: state, data."""
    st, _, data = init(
        key,
        X,
        y,
        task=task,
        n_features=n_features,
        n_features_v=n_features_v,
        mean_basis=mean_basis,
        prior=prior,
    )
    return st, data


@functools.lru_cache(maxsize=16)
def _info_shapes(cfg, signature):
    key, st, data = jax.tree.unflatten(signature[0], signature[1])
    return jax.eval_shape(functools.partial(_sweep, cfg), key, st, data)[1]


def _sweep_info_shapes(cfg, key, st, data):
    """Shapes of a sweep's ``info`` (traced once per configuration and input shapes)."""
    leaves, tree = jax.tree.flatten((key, st, data))
    return _info_shapes(cfg, (tree, tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in leaves)))


@functools.lru_cache(maxsize=32)
def compiled_chain(kernel: GaBaSRGibbs, num_warmup: int, num_samples: int, vectorized: bool):
    """Return the compiled chain ``(state) -> (last_state, draws, stats)``.

    ``num_warmup + num_samples`` calls of ``kernel.sample`` in one ``lax.scan``, keeping the
    last ``num_samples``: what ``numpyro.infer.MCMC`` does with the kernel, compiled once per
    kernel, settings and shapes (``MCMC`` builds a new loop, and XLA recompiles the sweep, at
    every ``run``). With ``vectorized`` the chains are batched with ``vmap`` (the state's
    leaves then have a leading chain axis).
    """
    fields = ("accept_rate", "drift") + (("accept_rate_v",) if kernel.config.M2 else ())

    def run(state):
        def step(s, _):
            s = kernel.sample(s, (), {})
            return s, (s.draws, {f: getattr(s, f) for f in fields})

        state, (draws, stats) = lax.scan(step, state, None, length=num_warmup + num_samples)
        return state, *jax.tree.map(lambda a: a[num_warmup:], (draws, stats))

    return jax.jit(jax.vmap(run) if vectorized else run)


def progress_block(num_warmup: int, num_samples: int) -> int:
    """Return the sweeps per compiled call when a progress bar is shown.

    The largest divisor of both counts that is at most a twentieth of the run (at least 1),
    so that warm-up and sampling run as calls of one compiled block and the bar moves about
    twenty times.
    """
    common = math.gcd(num_warmup, num_samples)
    cap = max(1, (num_warmup + num_samples) // 20)
    return max(d for d in range(1, min(common, cap) + 1) if common % d == 0)


def run_chains(
    kernel: GaBaSRGibbs,
    states: list,
    num_warmup: int,
    num_samples: int,
    *,
    vectorized: bool = False,
    progress_bar: bool = False,
):
    """Run the chains from their initial ``states``: the one driver of the Gibbs sampler.

    Each chain is ``num_warmup`` sweeps, whose draws are discarded, then ``num_samples``
    recorded sweeps (:func:`compiled_chain`). Without a progress bar a chain is one compiled
    call; with one, the sweeps run in calls of :func:`progress_block` sweeps each (the same
    sweeps from the same keys; XLA may round the last bits differently in the two loops)
    and a ``tqdm`` bar counts them.

    Parameters
    ----------
    kernel : GaBaSRGibbs
    states : list of GibbsMCMCState
        One initial state per chain (:meth:`GaBaSRGibbs.init`).
    num_warmup, num_samples : int
    vectorized : bool
        Batch the chains with ``vmap`` in one program instead of running them one by one.
    progress_bar : bool

    Returns
    -------
    tuple
        The last states (a batched state when ``vectorized``, else a list), the draws and
        the per-sweep statistics as dicts of arrays shaped ``(chain, draw, ...)``.
    """
    stack = functools.partial(jax.tree.map, lambda *a: jnp.stack(a))
    chains = [stack(*states)] if vectorized else list(states)
    if not progress_bar:
        run = compiled_chain(kernel, num_warmup, num_samples, vectorized)
        outs = [run(st) for st in chains]
    else:
        block = progress_block(num_warmup, num_samples)
        run = compiled_chain(kernel, 0, block, vectorized)
        total = len(chains) * (num_warmup + num_samples)
        outs = []
        with tqdm(total=total, desc="sweeps") as bar:
            for st in chains:
                kept = []
                for i in range(0, num_warmup + num_samples, block):
                    st, draws, stats = run(st)
                    if i >= num_warmup:
                        kept.append((draws, stats))
                    bar.update(block * (len(states) if vectorized else 1))
                joined = jax.tree.map(lambda *a: jnp.concatenate(a, axis=int(vectorized)), *kept)
                outs.append((st, *joined))
    if vectorized:
        return outs[0]
    return [o[0] for o in outs], *stack(*[o[1:] for o in outs])
