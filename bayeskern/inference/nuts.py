"""NUTS through NumPyro, returned as ArviZ ``InferenceData``.

What makes the GP fits fast is done here, once per fit:

* **A start near the posterior.** :func:`bayeskern.inference.start.find_map` runs L-BFGS
  from a few starts on the unconstrained log density and keeps the best mode; every chain
  starts from a draw of the Laplace approximation around it
  (:func:`bayeskern.inference.start.laplace_inits`), so warm-up does not spend its first
  windows walking in from the prior.
* **A mass matrix that fits the posterior.** NUTS starts with the inverse Hessian at that
  mode as its dense inverse mass matrix (and, by default, keeps adapting it in the usual
  windows), so its trajectories need few leapfrog steps.
* **Both cores.** Chains run one per CPU device; :mod:`bayeskern` asks JAX for one CPU
  device per core at import (:func:`bayeskern.devices.configure_cpu_devices`).
* **One compiled sampler per fit.** :class:`bayeskern.inference.chains.Chains` advances the
  chains through warm-up and every block of draws with one program, so a run that goes on
  until its chains have mixed (``num_samples="auto"``) does not compile again per block.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import init_to_median, init_to_uniform
from tqdm.auto import tqdm

from bayeskern import diagnostics
from bayeskern.inference.nuts_kernel import nuts_chains, transition_counts
from bayeskern.inference.nuts_processes import AutoStop, run_in_processes
from bayeskern.inference.start import (
    as_key,
    find_map,
    laplace_inits,
    model_functions,
    split_data,
)
from bayeskern.programs import shared_jit

__all__ = [
    "run_nuts",
    "AUTO_BLOCK",
    "AUTO_MAX_SAMPLES",
    "choose_chain_method",
    "check_sampler_counts",
    "check_factorizing_chain_method",
]


#: ``num_samples="auto"``: draws per chain per block, and the most draws per chain
AUTO_BLOCK = 100
AUTO_MAX_SAMPLES = 2000


def check_sampler_counts(num_warmup, num_samples, num_chains, *, auto: bool = False) -> None:
    """Raise ``ValueError`` naming the argument when a sampler count is not a positive int.

    With ``auto``, ``num_warmup`` and ``num_samples`` may also be ``"auto"`` (the estimator
    chooses; for ``num_samples`` see :func:`run_nuts`).
    """
    if auto:  # "auto" stands in for a valid count
        num_warmup = 0 if isinstance(num_warmup, str) and num_warmup == "auto" else num_warmup
        num_samples = 1 if isinstance(num_samples, str) and num_samples == "auto" else num_samples
    for name, v, lo in (
        ("num_warmup", num_warmup, 0),
        ("num_samples", num_samples, 1),
        ("num_chains", num_chains, 1),
    ):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            what = "a non-negative" if lo == 0 else "a positive"
            extra = " or 'auto'" if auto and name != "num_chains" else ""
            raise ValueError(f"{name} must be {what} integer{extra}, got {v!r}")


def choose_chain_method(num_chains: int, chain_method: str | None = None) -> str:
    """Return the chain method of a run whose user chose none.

    ``"parallel"`` (one chain per device) when there is one device per chain;
    otherwise, on a GPU or TPU, ``"vectorized"`` (the chains batched by ``vmap`` into one
    program, so that the accelerator works on all of them at each leapfrog step instead of
    idling between the small steps of one chain); otherwise, on a CPU with fewer devices than
    chains, ``"sequential"``. A vectorized step costs as many tree doublings as the slowest
    chain needs, which on a CPU is work done for nothing, and on an accelerator is hidden by
    the parallel hardware.

    Parameters
    ----------
    num_chains : int
        Number of chains of the run.
    chain_method : {None, "parallel", "sequential", "vectorized", "processes"}
        The user's choice, returned unchanged (after validation) when given.

    Returns
    -------
    str
        ``"parallel"``, ``"vectorized"`` or ``"sequential"`` (or the user's
        ``"processes"``).
    """
    if chain_method is not None:
        if chain_method not in ("parallel", "sequential", "vectorized", "processes"):
            raise ValueError(
                "chain_method must be 'parallel', 'sequential', 'vectorized' or 'processes', "
                f"got {chain_method!r}"
            )
        return chain_method
    if num_chains > 1 and jax.local_device_count() >= num_chains:
        return "parallel"
    if num_chains > 1 and jax.default_backend() in ("gpu", "tpu"):
        return "vectorized"
    return "sequential"


def check_factorizing_chain_method(
    chain_method: str | None, num_chains: int, *, parallel: bool = False
) -> None:
    """Refuse a chain method under which a model's factorizations can block XLA:CPU.

    jaxlib's LAPACK kernels (Cholesky, triangular solves) split a batch of matrices over
    XLA:CPU's thread pool and wait for the pieces, on threads of that same pool. With the
    chains batched into one program (``"vectorized"``), two such calls can run at once and
    leave every pool thread waiting, and the fit never ends. On a CPU, vectorized chains
    also take as many tree doublings as the slowest chain at every step, so
    ``"sequential"`` costs no more. The embedded-Laplace classifiers block the same way
    with one chain per CPU device (``parallel=True``: refuse ``"parallel"`` too when there
    are several CPU devices).

    Parameters
    ----------
    chain_method : str or None
        The user's chain method; ``None`` (the estimator chooses) always passes.
    num_chains : int
        Number of chains; one chain batches nothing.
    parallel : bool
        Also refuse ``"parallel"`` on several CPU devices.

    Raises
    ------
    ValueError
        Naming ``chain_method`` and what to use instead, on a CPU only.
    """
    if num_chains < 2 or jax.default_backend() != "cpu":
        return
    if chain_method == "vectorized" or (
        parallel and chain_method == "parallel" and jax.local_device_count() > 1
    ):
        raise ValueError(
            f"chain_method={chain_method!r} can block XLA:CPU forever with this model "
            "(its Cholesky factorizations, run by jaxlib's LAPACK kernels on XLA:CPU's thread "
            "pool, wait for threads that all wait too); on a CPU use None (the estimator's "
            "choice) or 'sequential'"
        )


# --------------------------------------------------------------------------- NUTS
def run_nuts(
    model: Callable,
    *,
    model_kwargs: dict[str, Any],
    rng_key,
    num_warmup: int = 500,
    num_samples: int | str = 500,
    num_chains: int = 4,
    chain_method: str | None = None,
    progress_bar: bool = True,
    target_accept_prob: float = 0.8,
    max_tree_depth: int = 10,
    dense_mass: bool | list = False,
    init_strategy=init_to_uniform,
    init: str = "prior",
    adapt_mass_matrix: bool = True,
    num_map_starts: int = 4,
    dims: dict[str, list[str]] | None = None,
    coords: dict[str, Any] | None = None,
    observed: dict[str, np.ndarray] | None = None,
    judged: list[str] | None = None,
    max_samples: int = AUTO_MAX_SAMPLES,
    data_at_mode: Callable[[dict], dict] | None = None,
    refind_mode: bool = False,
    rebuild: tuple[str, str, dict] | None = None,
):
    """Run NUTS on a NumPyro model and return its draws as ``InferenceData``.

    NumPyro's NUTS kernel (Hoffman & Gelman 2014) with its warm-up adaptation, advanced by
    :class:`bayeskern.inference.chains.Chains`: one compiled program per fit takes the chains
    through warm-up and every block of draws.

    Parameters
    ----------
    model, model_kwargs
        The NumPyro model and the keyword arguments it is called with.
    rng_key
        An int seed or a JAX key (explicit: the same seed gives the same draws).
    num_warmup, num_samples, num_chains
        Sampler counts (warm-up may be 0). ``num_samples="auto"``: draw blocks of
        :data:`AUTO_BLOCK` per chain after the warm-up until the ``judged`` quantities have
        R-hat ≤ 1.01 and bulk and tail ESS ≥ 100 per chain (Vehtari et al. 2021; the
        criteria of :func:`bayeskern.diagnostics.convergence_report`, divergences aside: more
        draws do not remove them), at most ``max_samples`` per chain, or until the draws so
        far project the chains to miss the criteria at the cap by a wide margin
        (:func:`bayeskern.diagnostics.auto_stop`). Every block continues
        the chains where the previous one stopped, with the adapted step size and mass
        matrix (draws of one Markov chain, not restarts). ``posterior.attrs`` record the
        draws taken (``num_samples``), why the run stopped (``num_samples_stop``:
        ``"mixed"``, ``"cap"``, ``"projected"``, or ``"fixed"`` for a fixed count), the cap
        (``max_samples``) and whether it stopped the run (``num_samples_capped``).
    chain_method
        ``None`` picks ``"parallel"`` when ``jax.local_device_count() >= num_chains``,
        otherwise ``"vectorized"`` on a GPU or TPU and ``"sequential"`` on a CPU (see
        :func:`choose_chain_method`). ``"parallel"`` runs one
        chain per device (``jax.shard_map``), ``"vectorized"`` batches the chains on one device
        (``vmap``). For the same ``rng_key`` all three give the same draws: each chain gets the
        same split key and the same start; only XLA's floating-point fusion differs
        (in the last digits; ``tests/test_parallel.py`` checks agreement to 1e-8).
        ``"processes"`` (needs ``rebuild``): the chains of ``"sequential"`` shared out to one
        Python process per core (:func:`bayeskern.inference.processes.map_in_processes`),
        for models whose chains cannot share XLA:CPU's devices; the mode search and the
        chains' starts are computed here once. With ``num_samples="auto"`` the workers hand
        over each block of draws as they go and this process decides after each block,
        across all chains, as in one process (the same draws; a worker may run one block
        past the decision, which is dropped).
    progress_bar
        NumPyro's progress bar; ``False`` for quiet runs.
    init
        ``"map"``: start the chains from draws of the Laplace approximation at the posterior
        mode (:func:`find_map`, :func:`laplace_inits`) with the inverse Hessian there as the
        initial dense inverse mass matrix; ``"prior"``: each chain starts where
        ``init_strategy`` puts it (NumPyro's ``init_to_uniform`` by default), identity mass.
    adapt_mass_matrix
        Adapt the mass matrix during warm-up (Stan's windows); with ``init="map"`` and
        ``False`` the inverse Hessian is used throughout.
    num_map_starts
        With ``init="map"``: number of L-BFGS starts of the mode search (:func:`find_map`).
    dims, coords
        Named dimensions and coordinates for the ``InferenceData``.
    observed
        Observed data groups to store (``{"y": y}``).
    judged
        With ``num_samples="auto"``: the posterior variables whose R-hat and ESS decide when
        to stop (default every variable; pass permutation-invariant quantities for mixtures);
        names the model did not sample are skipped.
    max_samples
        With ``num_samples="auto"``: the most draws per chain.
    data_at_mode
        With ``init="map"``: a function of the model's values at the posterior mode (every
        latent and deterministic site, constrained) returning new values for some of the
        array arguments in ``model_kwargs`` (same shapes), which the chains then run on.
        For arguments that change how the log density is computed, not its value: the
        classifiers start each draw's inner Newton iterations of the Laplace approximation
        from the latent mode at the posterior mode (``newton_start``); or for variational
        parameters chosen at the mode, which move the density: the regressor's inducing
        inputs (with ``refind_mode``).
    refind_mode
        With ``data_at_mode`` whose new arguments change the log density: find the mode
        and its Hessian again on them, by L-BFGS from the old mode, so that the chains start
        from that mode's Laplace draws with its inverse Hessian as the mass (the old
        density's Hessian can be far off: an inducing-point posterior can be much narrower
        once its inputs have moved).
    rebuild
        With ``chain_method="processes"``: ``(builder, config, arrays)``, where ``builder``
        names (``"module:function"``) a module-level function and ``builder(config, arrays)``
        returns ``(model, model_kwargs)`` equal to this call's, from a JSON string and a dict
        of NumPy arrays (what a worker process receives: no pickle).

    Returns
    -------
    idata : arviz.InferenceData
        ``posterior`` (constrained values and the model's deterministic sites) and
        ``sample_stats`` (``diverging``, ``n_steps`` = leapfrog steps per draw,
        ``tree_depth``, ``lp``, ``energy``, ``acceptance_rate``, ``step_size``), with the
        sampler settings and ``mean_steps_per_draw`` in ``posterior.attrs``.
    """
    if num_warmup == "auto":
        raise ValueError(
            "num_warmup must be a non-negative integer, got 'auto' (the estimators resolve it)"
        )
    check_sampler_counts(num_warmup, num_samples, num_chains, auto=True)
    auto = isinstance(num_samples, str)
    if auto and (
        isinstance(max_samples, bool)
        or not isinstance(max_samples, (int, np.integer))
        or max_samples < 1
    ):
        raise ValueError(f"max_samples must be a positive integer, got {max_samples!r}")
    block = min(AUTO_BLOCK, max_samples) if auto else num_samples
    if init not in ("map", "prior"):
        raise ValueError(f"init must be 'map' or 'prior', got {init!r}")
    method = choose_chain_method(num_chains, chain_method)
    if method == "processes" and rebuild is None:
        raise ValueError(
            "chain_method='processes' needs a model that can be rebuilt in another process "
            "(rebuild)"
        )
    key, k_start, k_map, k_init = jax.random.split(as_key(rng_key), 4)
    map_info, overrides = {}, {}
    inverse_mass = None
    if init == "map":
        functions = model_functions(
            model, model_kwargs, k_start[None], init_to_median(num_samples=15)
        )
        mode = find_map(model, model_kwargs, k_map, functions=functions, num_starts=num_map_starts)
        dense_mass = True
        starts_density = -mode.potentials
        if data_at_mode is not None:
            post = shared_jit(lambda z, data: functions.postprocess_gen(data)(z))
            at_mode = post(mode.z, functions.data)
            overrides = data_at_mode(at_mode)
            data, _ = split_data({**model_kwargs, **overrides})
            functions = functions._replace(
                data=data,
                potential_fn=functions.potential_gen(data),
                postprocess_fn=functions.postprocess_gen(data),
            )
            if refind_mode:
                mode = find_map(model, model_kwargs, k_map, functions=functions, starts=[mode.z])
        init_params, inverse_mass = laplace_inits(mode, k_init, num_chains)
        map_info = dict(
            map_log_density=-mode.potential,
            map_starts_log_density=str(np.round(starts_density, 3).tolist()),
        )
    else:
        functions = model_functions(
            model, model_kwargs, jax.random.split(k_start, num_chains), init_strategy
        )
        init_params = functions.starts
    settings = dict(
        target_accept_prob=target_accept_prob,
        max_tree_depth=max_tree_depth,
        dense_mass=dense_mass,
        adapt_mass_matrix=adapt_mass_matrix,
    )
    # each chain's key as NumPyro's MCMC.run splits them
    keys = jax.random.split(key, num_chains) if num_chains > 1 else key[None]
    init_params = jax.tree.map(lambda a: jnp.asarray(a, jnp.result_type(a)), init_params)
    # one program advances the chains through warm-up and every block of draws
    length = max(1, min(AUTO_BLOCK, max(num_warmup, block)))
    to_idata = partial(diagnostics.from_mcmc, dims=dims, coords=coords, observed=observed)
    if method == "processes":
        stop = (
            AutoStop(
                block, max_samples, lambda n, *d: _auto_stop(to_idata(*d), judged, n, max_samples)
            )
            if auto
            else None
        )
        samples, stats = run_in_processes(
            rebuild,
            overrides,
            settings,
            keys,
            init_params,
            inverse_mass,
            dict(num_warmup=num_warmup, num_samples=num_samples, length=length),
            progress_bar,
            stop=stop,
        )
        taken = next(iter(samples.values())).shape[1]
        idata = to_idata(samples, stats)
        stopped = stop and stop.reason
    else:
        # with a progress bar the program returns every tenth of a block, so that the bar
        # moves and Ctrl-C lands
        step = max(1, length // 10) if progress_bar else length
        chains = nuts_chains(
            functions,
            settings,
            inverse_mass,
            num_chains=num_chains,
            method=method,
            num_warmup=num_warmup,
            length=length,
        )
        bar = tqdm(total=num_warmup + block, desc="warmup", disable=not progress_bar, leave=False)
        with bar:
            state = chains.init(keys, init_params)
            for count in transition_counts(num_warmup, step):
                state, _, _ = chains.advance(state, count, collect=False)
                bar.update(count)
            bar.set_description("sample")
            blocks, taken, target, stopped = [], 0, block, None
            while True:
                for count in transition_counts(target - taken, step):
                    state, new, new_stats = chains.advance(state, count)
                    blocks.append((new, new_stats))
                    taken += count
                    bar.update(count)
                # the draws so far, concatenated along the draw axis
                samples, stats = jax.tree.map(lambda *b: np.concatenate(b, axis=1), *blocks)
                blocks = [(samples, stats)]
                idata = to_idata(samples, stats)
                if not auto or (stopped := _auto_stop(idata, judged, taken, max_samples)):
                    break
                target = min(taken + block, max_samples)  # every chain goes on, adaptation frozen
                bar.total = num_warmup + target
                bar.refresh()
    diagnostics.set_attrs(
        idata,
        sampler="NUTS",
        num_warmup=num_warmup,
        num_samples=taken,
        num_samples_requested=str(num_samples),
        **stop_attrs(stopped, max_samples, taken),
        num_chains=num_chains,
        chain_method=method,
        target_accept_prob=target_accept_prob,
        max_tree_depth=max_tree_depth,
        dense_mass=str(dense_mass),
        init=init,
        adapt_mass_matrix=str(adapt_mass_matrix),
        mean_steps_per_draw=float(np.mean(np.asarray(stats["num_steps"]))),
        **map_info,
    )
    return idata


def stop_attrs(stopped: str | None, max_samples: int, taken: int) -> dict:
    """Return the ``posterior.attrs`` that say why a run stopped after ``taken`` draws.

    ``stopped``: the reason :func:`bayeskern.diagnostics.auto_stop` gave a
    ``num_samples="auto"`` run, ``None`` for a fixed count; ``max_samples``: its cap.
    """
    return dict(
        num_samples_capped=int(stopped == "cap"),
        num_samples_stop=stopped or "fixed",
        max_samples=max_samples if stopped else taken,
    )


def _auto_stop(idata, judged: list[str] | None, taken: int, max_samples: int) -> str | None:
    """:func:`bayeskern.diagnostics.auto_stop` on the ``judged`` variables the model sampled."""
    if judged is not None:  # a model may leave a site out (e.g. no periodic component)
        judged = [v for v in judged if v in idata.posterior]
    return diagnostics.auto_stop(idata, taken, max_samples, judged)
