"""Posterior draws of the estimators: flattened, mapped over (devices), thinned, in data units."""

from __future__ import annotations

import weakref

import jax
import jax.numpy as jnp
import numpy as np

from bayeskern import diagnostics
from bayeskern.batching import batched_map, pad_rows
from bayeskern.estimators.validation import check_interval
from bayeskern.programs import shared_jit

__all__ = [
    "flat_draws",
    "map_draws",
    "data_unit_variables",
    "PREDICTIVE_MAX_VALUES",
    "thin_draws",
    "proba_interval",
]


def flat_draws(idata, var_names) -> dict[str, np.ndarray]:
    """Posterior draws as arrays with chains and draws flattened into one leading axis."""
    post = idata.posterior
    out = {}
    for v in var_names:
        a = np.asarray(post[v])
        out[v] = a.reshape((-1,) + a.shape[2:])
    return out


#: compiled draw maps, per function (weakly held: an entry goes when its function does), then
#: per (devices, number of arguments, batch size)
_DRAW_MAPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _draw_map(fn, n_dev: int, n_args: int, batch_size: int):
    """``jax.jit`` of ``fn`` mapped over draws, the draws split over ``n_dev`` devices.

    Cached per ``fn``: a function defined once (a module-level function, a method's function
    kept on a fitted estimator) compiles once per shape, however often it is mapped. The cached
    program refers to ``fn`` weakly, so the entry is freed with ``fn``; a closure made per call
    is compiled per call, as before.
    """
    try:
        per_fn = _DRAW_MAPS.setdefault(fn, {})
        ref = weakref.ref(fn)
    except TypeError:  # not weakly referable: compiled for this call only
        per_fn, ref = {}, lambda: fn
    key = (n_dev, n_args, batch_size)
    if key not in per_fn:

        def per_device(d, *a):
            f = ref()
            return batched_map(lambda x: f(x, *a), d, batch_size)

        if n_dev > 1:  # one share of the draws per device: jit of shard_map, no pmap cache
            P = jax.sharding.PartitionSpec
            mesh = jax.sharding.Mesh(np.array(jax.local_devices()[:n_dev]), ("draws",))
            per_device = jax.shard_map(
                per_device,
                mesh=mesh,
                in_specs=(P("draws"),) + (P(),) * n_args,
                out_specs=P("draws"),
                check_vma=False,
            )
        per_fn[key] = shared_jit(per_device)
    return per_fn[key]


def map_draws(fn, draws: dict, *args, batch_size: int = 1):
    """Apply ``fn(draw, *args)`` to every posterior draw.

    With :func:`~bayeskern.batching.batched_map`, the draws split over the CPU devices (one
    share per device, ``jax.shard_map`` under ``jax.jit``; see :mod:`bayeskern.devices`) when
    there are several. The compiled map is cached per ``fn`` (:func:`_draw_map`): pass a
    function defined once, with the data as ``args``, and repeated calls on arrays of the same
    shapes do not compile again.

    ``batch_size`` stays 1 for bodies with linear algebra: batches of draws put batched
    LAPACK calls (Cholesky, triangular solves) inside ``lax.map``'s loop, and that can
    block forever in XLA:CPU, with or without a remainder batch, where one draw at a time
    does not (``tests/test_batched_map.py``).
    """
    jdraws = {k: jnp.asarray(v) for k, v in draws.items()}
    n = jax.tree_util.tree_leaves(jdraws)[0].shape[0]
    n_dev = min(jax.local_device_count(), n)
    mapped = _draw_map(fn, n_dev, len(args), batch_size)
    if n_dev < 2:
        return mapped(jdraws, *args)
    padded, _ = pad_rows(jdraws, n_dev)
    return jax.tree_util.tree_map(lambda a: a[:n], mapped(padded, *args))


def data_unit_variables(posterior, kernel, x_scale, y_scale=None) -> tuple[dict, dict]:
    """Restate the sampled length hyper-parameters (and amplitudes, noise) in data units.

    The sampler works on inputs standardized per column (:math:`\\tilde x_j = (x_j -
    m_j)/s_j`) and, for regression, on :math:`\\tilde y = (y - m_y)/s_y`. A length
    :math:`\\tilde\\ell` (length-scale, period: parameters with ``Hyper.length``) is
    :math:`\\ell_j = \\tilde\\ell\\, s_j` in the units of column :math:`j` (so one value
    per column even for an isotropic kernel, dims ``feature``); with ``y_scale`` the
    amplitudes :math:`a_t` and the noise :math:`\\sigma` become :math:`a_t s_y` and
    :math:`\\sigma s_y`. Returns ``(arrays (chain, draw, ...), dims)`` named
    ``<site>_data_units`` (:data:`~bayeskern.diagnostics.DATA_UNITS_SUFFIX`).
    """
    suffix = diagnostics.DATA_UNITS_SUFFIX
    x_scale = np.asarray(x_scale, dtype=float)
    data, dims = {}, {}
    for leaf in kernel.leaves():
        for p, h in leaf.hyperparameters().items():
            site = leaf._site(p)
            if h.length and site in posterior:
                a = np.asarray(posterior[site])
                data[site + suffix] = (a[..., None] if a.ndim == 2 else a) * x_scale
                dims[site + suffix] = ["feature"]
    for site in ("amplitude", "noise") if y_scale is not None else ():
        if site in posterior:
            data[site + suffix] = np.asarray(posterior[site]) * float(np.squeeze(y_scale))
            dims[site + suffix] = list(posterior[site].dims[2:])
    return data, dims


#: most values (rows x draws) stored in a ``posterior_predictive`` or ``predictions`` group
#: (2**24 float64: 128 MiB); beyond, :func:`thin_draws` keeps fewer posterior draws
PREDICTIVE_MAX_VALUES = 2**24


def thin_draws(
    n_chain: int,
    n_draw: int,
    n_rows: int,
    n_draws: int | None = None,
    max_values: int | None = None,
) -> np.ndarray:
    """Flat indices of the posterior draws kept for a predictive group.

    All :math:`C \\times D` draws when they fit, else :math:`k = \\max(1,
    \\lfloor K / C\\rfloor)` evenly spaced draws of each chain, with :math:`K =
    \\min(n_{draws}, \\lfloor V / n_{rows}\\rfloor)` and :math:`V` = ``max_values``
    (default :data:`PREDICTIVE_MAX_VALUES`): the
    stored values stay below :math:`V` (or :math:`C \\cdot n_{rows}`) whatever the rows.
    Every chain keeps the same draws, so the group stays ``(chain, draw, obs)``.
    """
    max_values = PREDICTIVE_MAX_VALUES if max_values is None else max_values
    total = n_chain * n_draw if n_draws is None else min(n_chain * n_draw, int(n_draws))
    total = min(total, max_values // max(n_rows, 1))
    per_chain = max(1, total // n_chain)
    keep = np.unique(np.linspace(0, n_draw - 1, per_chain).round().astype(np.int64))
    return (np.arange(n_chain)[:, None] * n_draw + keep[None, :]).ravel()


def proba_interval(draws: np.ndarray, interval) -> tuple[np.ndarray, np.ndarray]:
    r"""Equal-tailed credible interval of class probabilities over posterior draws.

    With :math:`p^{(s)}_{ic}` the probability of class :math:`c` at point :math:`i` under
    posterior draw :math:`s` (the latent function integrated out), the bounds are the
    :math:`(1 - \gamma)/2` and :math:`(1 + \gamma)/2` quantiles over :math:`s`
    (Gelman et al. 2013, "Bayesian Data Analysis", section 2.3), :math:`\gamma` = ``interval``.

    Parameters
    ----------
    draws : (S, n, C) per-draw class probabilities.
    interval : float in (0, 1), the posterior mass inside the interval.

    Returns
    -------
    lower, upper : (n, C) arrays.
    """
    check_interval(interval)
    q = np.quantile(draws, [(1.0 - interval) / 2.0, (1.0 + interval) / 2.0], axis=0)
    return q[0], q[1]
