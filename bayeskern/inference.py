"""The one place that runs MCMC: NUTS through NumPyro, returned as ArviZ ``InferenceData``."""

from __future__ import annotations

import warnings
from typing import Any, Callable

import jax
import numpy as np
from numpyro.infer import MCMC, NUTS, init_to_median

from bayeskern import diagnostics

__all__ = ["run_nuts", "choose_chain_method", "check_sampler_counts", "as_key"]


def as_key(seed) -> jax.Array:
    """A JAX PRNG key from an int, a NumPy ``Generator``/``RandomState`` or a key."""
    if seed is None:
        seed = 0
    if isinstance(seed, (int, np.integer)):
        return jax.random.PRNGKey(int(seed))
    if isinstance(seed, np.random.RandomState):
        return jax.random.PRNGKey(int(seed.randint(0, 2**31 - 1)))
    if isinstance(seed, np.random.Generator):
        return jax.random.PRNGKey(int(seed.integers(0, 2**31 - 1)))
    return seed


def check_sampler_counts(num_warmup, num_samples, num_chains) -> None:
    """Raise ``ValueError`` naming the argument when a sampler count is not a positive int."""
    for name, v, lo in (
        ("num_warmup", num_warmup, 0),
        ("num_samples", num_samples, 1),
        ("num_chains", num_chains, 1),
    ):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            what = "a non-negative" if lo == 0 else "a positive"
            raise ValueError(f"{name} must be {what} integer, got {v!r}")


def choose_chain_method(num_chains: int, chain_method: str | None = None) -> str:
    """``"parallel"`` when there is one device per chain, else ``"sequential"``.

    ``"vectorized"`` is accepted when asked for explicitly (one device, chains batched by
    ``vmap``; fastest for small models, but every chain then takes as many tree steps as the
    slowest one).
    """
    if chain_method is not None:
        if chain_method not in ("parallel", "sequential", "vectorized"):
            raise ValueError(
                "chain_method must be 'parallel', 'sequential' or 'vectorized', "
                f"got {chain_method!r}"
            )
        return chain_method
    return "parallel" if num_chains > 1 and jax.local_device_count() >= num_chains else "sequential"


def run_nuts(
    model: Callable,
    *,
    model_kwargs: dict[str, Any],
    rng_key,
    num_warmup: int = 500,
    num_samples: int = 500,
    num_chains: int = 4,
    chain_method: str | None = None,
    progress_bar: bool = True,
    target_accept_prob: float = 0.8,
    max_tree_depth: int = 10,
    dense_mass: bool | list = False,
    init_strategy=init_to_median,
    dims: dict[str, list[str]] | None = None,
    coords: dict[str, Any] | None = None,
    observed: dict[str, np.ndarray] | None = None,
    extra_fields: tuple[str, ...] = ("num_steps",),
):
    """Run NUTS on a NumPyro model and return ``(InferenceData, MCMC)``.

    Parameters
    ----------
    model, model_kwargs
        The NumPyro model and the keyword arguments it is called with.
    rng_key
        An int seed or a JAX key (explicit: the same seed gives the same draws).
    num_warmup, num_samples, num_chains
        Sampler counts (warm-up may be 0).
    chain_method
        ``None`` picks ``"parallel"`` when ``jax.local_device_count() >= num_chains``,
        otherwise ``"sequential"`` (see :func:`choose_chain_method`). ``"parallel"`` runs one
        chain per device (``pmap``), ``"vectorized"`` batches the chains on one device
        (``vmap``). For the same ``rng_key`` all three give the same draws: each chain gets the
        same split key; only XLA's floating-point fusion differs (measured differences
        ~1e-12, tested to 1e-8 in ``tests/test_parallel.py`` on CPU with
        ``XLA_FLAGS=--xla_force_host_platform_device_count=2``, which must be set before JAX
        is imported to get several CPU devices). No hang was seen with parallel chains
        (with or without the progress bar; NumPyro 0.22, JAX 0.10); the test runs them in a
        subprocess with a timeout so that a hang would fail rather than block.
    progress_bar
        NumPyro's progress bar; ``False`` for quiet runs.
    dims, coords
        Named dimensions and coordinates for the ``InferenceData``.
    observed
        Observed data groups to store (``{"y": y}``).

    Returns
    -------
    idata : arviz.InferenceData
        ``posterior`` and ``sample_stats`` (``diverging``, ``tree_depth``, ``n_steps``...),
        with the sampler settings in ``posterior.attrs``.
    mcmc : numpyro.infer.MCMC
    """
    check_sampler_counts(num_warmup, num_samples, num_chains)
    method = choose_chain_method(num_chains, chain_method)
    kernel = NUTS(
        model,
        target_accept_prob=target_accept_prob,
        max_tree_depth=max_tree_depth,
        dense_mass=dense_mass,
        init_strategy=init_strategy,
    )
    mcmc = MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method=method,
        progress_bar=progress_bar,
    )
    with warnings.catch_warnings():
        # NumPyro warns when chains outnumber devices; we chose sequential on purpose.
        warnings.filterwarnings("ignore", message="There are not enough devices")
        mcmc.run(as_key(rng_key), extra_fields=extra_fields, **model_kwargs)
    idata = diagnostics.to_inference_data(mcmc, dims=dims, coords=coords, observed=observed)
    diagnostics.set_attrs(
        idata,
        sampler="NUTS",
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method=method,
        target_accept_prob=target_accept_prob,
        max_tree_depth=max_tree_depth,
        dense_mass=str(dense_mass),
    )
    return idata, mcmc
