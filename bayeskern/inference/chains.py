"""NUTS chains advanced block by block through one compiled program per fit.

NumPyro's ``MCMC.run`` compiles its sampling loop at every call: the loop's body is a new
closure each time, and in parallel mode the chains are ``pmap``-ed through a new ``partial``.
A run that continues its chains in blocks until they have mixed (``num_samples="auto"`` in
:func:`bayeskern.inference.run_nuts`) therefore compiled the whole NUTS program once per
block. Here every chain of a fit goes through three programs compiled once for that fit:

* ``init``: NumPyro's initial HMC state of each chain (potential, gradient, heuristic step
  size, adaptation state) from its key and start;
* ``advance``: ``count`` NUTS transitions of each chain (``count`` a run-time argument, at most
  ``length``), collecting the unconstrained draws and the sampler statistics. Warm-up is the
  same transition: NumPyro's kernel adapts the step size and mass matrix while its iteration
  counter is below ``num_warmup`` (Stan's windows, Hoffman & Gelman 2014, section 3.2; with
  the mass matrix fixed, one step-size window over the whole warm-up) and freezes them
  after, so the warm-up and every later block run the same program;
* ``constrain``: the model's constrained and deterministic values of a block of draws.

The chains map over devices as in NumPyro: ``"parallel"`` one chain per device (``jax.jit``
of ``jax.shard_map``, which leaves nothing in ``pmap``'s cache; with fewer devices than
chains, an equal share of the chains per device, one after another), ``"vectorized"`` batched on
one device (``vmap``), ``"sequential"`` one after another (``lax.map``). Each chain gets the
key and start NumPyro's ``MCMC.run`` would give it, so the draws are those of the same chains.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from operator import attrgetter
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from numpyro.infer import hmc_util

from ..programs import shared_jit

__all__ = ["Chains", "STATS"]

#: per-draw sampler statistics collected (NumPyro's names; ``HMCState`` fields)
STATS = (
    "diverging",
    "num_steps",
    "energy",
    "accept_prob",
    "potential_energy",
    "adapt_state.step_size",
)


_SCHEDULE_LOCK = threading.Lock()


@contextlib.contextmanager
def _one_step_size_window(enabled: bool):
    """NumPyro's warm-up adapter built with one adaptation window, while ``enabled``.

    Stan's schedule (Hoffman & Gelman 2014; Stan Reference Manual, "HMC algorithm
    parameters") splits warm-up into windows that end with a new mass matrix, and restarts the
    step size's dual averaging at each of them, so the step size kept for sampling is the
    average over the last window only (50 of 200 iterations; 10 of 100). With the mass matrix
    fixed there is nothing to restart for: one window averages the step size over the whole
    warm-up. NumPyro builds its schedule with ``hmc_util.build_adaptation_schedule`` when the
    warm-up adapter is made (inside ``HMC.init``); this swaps in a one-window schedule for
    that call, the one-window schedule NumPyro itself uses below 20 warm-up iterations.
    Adapters are built under a lock either way, so that a fit in another thread (a grid
    search's thread pool) never builds its adapter while the schedule is swapped.
    """
    with _SCHEDULE_LOCK:
        if not enabled:
            yield
            return
        stan = hmc_util.build_adaptation_schedule
        hmc_util.build_adaptation_schedule = lambda n: [hmc_util.AdaptWindow(0, n - 1)]
        try:
            yield
        finally:
            hmc_util.build_adaptation_schedule = stan


def _stats(state) -> dict:
    return {name: attrgetter(name)(state) for name in STATS}


def _over_chains(fn: Callable, method: str, num_chains: int) -> Callable:
    """``fn(per_chain, shared)`` mapped over the leading (chain) axis, compiled (shared_jit)."""

    def each(per_chain, shared):
        return lax.map(lambda c: fn(c, shared), per_chain)

    if method == "vectorized":
        return shared_jit(jax.vmap(fn, in_axes=(0, None)))
    if method == "parallel":  # the chains split evenly over as many devices as possible
        n_dev = max(d for d in range(1, jax.local_device_count() + 1) if num_chains % d == 0)
        P = jax.sharding.PartitionSpec
        mesh = jax.sharding.Mesh(np.array(jax.local_devices()[:n_dev]), ("chains",))
        each = jax.shard_map(
            each, mesh=mesh, in_specs=(P("chains"), P()), out_specs=P("chains"), check_vma=False
        )
    return shared_jit(each)


class Chains:
    """The NUTS chains of one fit, advanced by :meth:`advance` in blocks of any size.

    Parameters
    ----------
    kernel : numpyro.infer.NUTS
        The sampler; its potential takes the data as its one model argument
        (``potential_fn_gen(data)``), as in :func:`bayeskern.inference.run_nuts`.
    postprocess_gen : callable
        ``postprocess_gen(data)(z)``: constrained and deterministic values of draw ``z``.
    data : pytree of arrays
        The model's data, passed to every program as an input.
    num_chains, method
        Number of chains and how they map (``"parallel"``, ``"vectorized"``,
        ``"sequential"``; see :func:`bayeskern.inference.choose_chain_method`).
    num_warmup
        Adaptation steps at the start of every chain.
    length
        The most transitions one :meth:`advance` call takes (its buffers' length).
    """

    def __init__(
        self,
        kernel,
        postprocess_gen: Callable,
        data: Any,
        *,
        num_chains: int,
        method: str,
        num_warmup: int,
        length: int,
    ):
        self.data = data
        self.length = length
        self._inverse_mass = kernel._inverse_mass_matrix
        # a fixed mass matrix: the step size adapts over the whole warm-up in one window
        one_window = not kernel._adapt_mass_matrix

        def init(chain, shared):
            (key, params), (data, inverse_mass) = chain, shared
            # the starting inverse mass matrix is an input too, not a constant of the program
            fixed, kernel._inverse_mass_matrix = kernel._inverse_mass_matrix, inverse_mass
            try:
                with _one_step_size_window(one_window):
                    return kernel.init(key, num_warmup, params, model_args=(data,), model_kwargs={})
            finally:
                kernel._inverse_mass_matrix = fixed

        def advance(state, shared):
            data, count = shared
            buffers = jax.tree.map(
                lambda a: jnp.zeros((length,) + a.shape, a.dtype), (state.z, _stats(state))
            )

            def step(i, carry):
                s, b = carry
                s = kernel.sample(s, (data,), {})
                return s, jax.tree.map(lambda buf, v: buf.at[i].set(v), b, (s.z, _stats(s)))

            return lax.fori_loop(0, count, step, (state, buffers))

        def constrain(z, data):
            return jax.vmap(postprocess_gen(data))(z)

        self._init = _over_chains(init, method, num_chains)
        self._advance = _over_chains(advance, method, num_chains)
        self._constrain = _over_chains(constrain, method, num_chains)

    def init(self, keys, init_params):
        """Return the initial state of every chain from ``keys`` (chains, 2) and starts."""
        return self._init((keys, init_params), (self.data, self._inverse_mass))

    def advance(self, state, count: int, *, collect: bool = True):
        """Take ``count`` (≤ ``length``) transitions of every chain from ``state``.

        Returns the new state and, with ``collect``, the draws (constrained, the model's
        deterministic sites included) and the statistics (:data:`STATS`), each
        ``(chain, count, ...)`` as NumPy arrays; without ``collect`` (warm-up) ``None, None``.
        """
        if not 0 < count <= self.length:
            raise ValueError(f"count must be in 1..{self.length}, got {count}")
        state, (z, stats) = self._advance(state, (self.data, jnp.asarray(count, jnp.int32)))
        if not collect:
            return state, None, None
        draws = self._constrain(z, self.data)
        cut = lambda a: np.asarray(a)[:, :count]  # noqa: E731
        return state, jax.tree.map(cut, draws), jax.tree.map(cut, stats)
