"""Where the NUTS chains start: a model's functions, its mode and the Laplace starts.

* :func:`model_functions`: the potential, post-processing and start values of a NumPyro model
  from one compiled trace (the data passed as inputs, :func:`split_data`);
* :func:`find_map`: L-BFGS from a few starts on the unconstrained log density, the best mode
  kept, with the Hessian there;
* :func:`laplace_inits`: each chain's start drawn from the Laplace approximation at the mode,
  whose inverse Hessian is also NUTS's starting inverse mass matrix
  (:func:`bayeskern.inference.run_nuts`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro.distributions.transforms import biject_to
from numpyro.handlers import seed, substitute, trace
from numpyro.infer import init_to_median
from numpyro.infer.util import get_potential_fn
from scipy import optimize

from bayeskern.kernels import Kernel
from bayeskern.programs import shared_jit

__all__ = [
    "MapResult",
    "ModelFunctions",
    "as_key",
    "find_map",
    "laplace_inits",
    "model_functions",
    "split_data",
]


def as_key(seed) -> jax.Array:
    """Return a JAX PRNG key from an int, a NumPy ``Generator``/``RandomState`` or a key."""
    if seed is None:
        seed = 0
    if isinstance(seed, (int, np.integer)):
        return jax.random.PRNGKey(int(seed))
    if isinstance(seed, np.random.RandomState):
        return jax.random.PRNGKey(int(seed.randint(0, 2**31 - 1)))
    if isinstance(seed, np.random.Generator):
        return jax.random.PRNGKey(int(seed.integers(0, 2**31 - 1)))
    return seed


# --------------------------------------------------------------------------- the model
class ModelFunctions(NamedTuple):
    """What the samplers need from a NumPyro model (see :func:`model_functions`).

    Attributes
    ----------
    potential_fn : callable
        Negative log joint density of a dict of unconstrained values (NumPyro's potential,
        Jacobians of the transforms included), on the model's data.
    postprocess_fn : callable
        Unconstrained values -> constrained values of every latent site and the values of the
        model's ``deterministic`` sites.
    transforms : dict
        The bijection from the unconstrained space to each latent site's support.
    starts : dict
        Unconstrained start values, one per key given (leading axis).
    data : list
        The arrays among the model's keyword arguments (see :func:`split_data`).
    potential_gen, postprocess_gen : callable
        ``data -> potential_fn`` and ``data -> postprocess_fn``: the same functions with the
        arrays as arguments, so that compiled programs take the data as inputs instead of
        embedding them as constants (one compilation serves every data set of one shape).
    """

    potential_fn: Callable
    postprocess_fn: Callable
    transforms: dict
    starts: dict
    data: list
    potential_gen: Callable
    postprocess_gen: Callable


def split_data(model_kwargs: dict) -> tuple[list, Callable]:
    """Split a model's keyword arguments into the arrays and the rest.

    Every NumPy or JAX array among the leaves of ``model_kwargs`` (as a pytree) is data;
    everything else stays fixed: Python numbers, strings, ``None``, and kernels whole (their
    fixed values can feed host callbacks, which cannot take traced values). Returns
    ``(data, bind)`` with ``bind(data) == model_kwargs`` for the same data, and the same
    structure for arrays (or tracers) of the same shapes: jitted functions of ``data``
    compile once per shape, not once per data set.
    """
    leaves, treedef = jax.tree.flatten(model_kwargs, is_leaf=lambda v: isinstance(v, Kernel))
    is_data = [isinstance(v, (np.ndarray, np.generic, jax.Array)) for v in leaves]
    data = [v for v, d in zip(leaves, is_data, strict=True) if d]
    fixed = [None if d else v for v, d in zip(leaves, is_data, strict=True)]

    def bind(data):
        it = iter(data)
        values = [next(it) if d else v for d, v in zip(is_data, fixed, strict=True)]
        return jax.tree.unflatten(treedef, values)

    return data, bind


def model_functions(model: Callable, model_kwargs: dict, keys, init_strategy) -> ModelFunctions:
    """Potential, post-processing and start values of a NumPyro model, in one compiled trace.

    NumPyro's ``initialize_model`` does the same by running the model op by op (eagerly),
    which compiles every operation separately; here the whole trace is one compilation.
    The model is traced once under ``jit`` with the ``init_strategy`` substituted (one
    start per key); the latent sites' supports come out of that trace. Models with discrete
    latent sites or supports that depend on other sites are refused.
    """
    supports: dict = {}
    has_deterministic = []

    data, bind = split_data(model_kwargs)

    def starts(key, data):
        tr = trace(substitute(seed(model, key), substitute_fn=init_strategy)).get_trace(
            **bind(data)
        )
        values = {}
        for name, site in tr.items():
            if site["type"] == "deterministic":
                has_deterministic.append(name)
            if site["type"] != "sample" or site["is_observed"]:
                continue
            support = site["fn"].support
            if support.is_discrete:
                raise NotImplementedError(
                    f"site {name!r} is discrete; bayeskern's samplers need continuous latent sites"
                )
            for bound in ("lower_bound", "upper_bound"):
                if not isinstance(getattr(support, bound, 0.0), (int, float)):
                    raise NotImplementedError(
                        f"the support of site {name!r} depends on other "
                        "sites; bayeskern's samplers do not handle that"
                    )
            supports[name] = support
            values[name] = site["value"]
        return values

    values = shared_jit(jax.vmap(starts, in_axes=(0, None)))(jnp.asarray(keys), data)
    transforms = {name: biject_to(support) for name, support in supports.items()}
    z = {name: transforms[name].inv(v) for name, v in values.items()}
    potential_of, postprocess_of = get_potential_fn(
        model, transforms, replay_model=bool(has_deterministic), dynamic_args=True
    )

    def potential_gen(data):
        return potential_of(**bind(data))

    def postprocess_gen(data):
        return postprocess_of(**bind(data))

    return ModelFunctions(
        potential_gen(data),
        postprocess_gen(data),
        transforms,
        z,
        data,
        potential_gen,
        postprocess_gen,
    )


# --------------------------------------------------------------------------- the mode
class MapResult(NamedTuple):
    """The posterior mode in NumPyro's unconstrained space.

    Attributes
    ----------
    z : dict
        Unconstrained values of every latent site at the best mode found.
    potential : float
        Negative log density (unnormalized) there.
    hessian : (p, p) array
        Hessian of the potential at ``z`` (flattened in ``ravel_pytree`` order).
    potentials : (num_starts,) array
        The potential each start reached (``inf`` where it failed).
    value_and_grad : callable
        The potential and its gradient at a flat unconstrained vector (jitted).
    """

    z: dict
    potential: float
    hessian: np.ndarray
    potentials: np.ndarray
    value_and_grad: Callable


def _site_values(functions: ModelFunctions, z: dict) -> str:
    """``site = value`` for every sampled site at unconstrained ``z`` (for error messages)."""
    parts = []
    for k in sorted(z):
        v = np.asarray(functions.transforms[k](z[k]))
        parts.append(f"{k} = {np.array2string(v, precision=4, threshold=6)}")
    return ", ".join(parts)


def find_map(
    model: Callable,
    model_kwargs: dict,
    rng_key,
    *,
    num_starts: int = 4,
    max_iter: int = 200,
    gtol: float = 1e-4,
    functions: ModelFunctions | None = None,
    starts: list[dict] | None = None,
) -> MapResult:
    """Posterior mode of a NumPyro model by L-BFGS from several starts.

    The first start is the prior median of every site (NumPyro's ``init_to_median``), the
    others uniform in (-2, 2) on the unconstrained scale (NumPyro's ``init_to_uniform``, its
    default start for NUTS); ``starts`` (unconstrained values of every site, as
    :attr:`MapResult.z`) replaces them, e.g. a mode found before on nearby data. The
    potential minimized is NumPyro's: the negative log joint on the unconstrained space,
    Jacobians of the transforms included, so the mode is that of the density NUTS samples.
    SciPy's L-BFGS-B drives one jitted value-and-gradient of the potential (nothing else is
    compiled); the Hessian at the mode is the central difference of that gradient
    (:func:`_hessian`: :math:`2p` evaluations for :math:`p` unconstrained parameters, more
    where rounding noise in the gradient needs a longer step).

    Raises
    ------
    ValueError
        When no start reaches a finite log density; the message lists every sampled site
        and its value at the prior median.
    """
    k_median, k_uniform = jax.random.split(as_key(rng_key))
    if functions is None:
        functions = model_functions(
            model, model_kwargs, k_median[None], init_to_median(num_samples=15)
        )
    median = jax.tree.map(lambda a: a[0], functions.starts)
    x_median, unravel = ravel_pytree(median)
    if starts is None:
        # NumPyro's init_to_uniform, drawn directly on the flat unconstrained vector
        uniform = jax.random.uniform(
            k_uniform,
            (num_starts - 1, x_median.shape[0]),
            minval=-2.0,
            maxval=2.0,
            dtype=x_median.dtype,
        )
        starts = [x_median, *uniform]
    else:
        starts = [ravel_pytree(z)[0] for z in starts]
        num_starts = len(starts)
    potential_gen, data = functions.potential_gen, functions.data
    compiled = shared_jit(jax.value_and_grad(lambda x, data: potential_gen(data)(unravel(x))))

    def value_and_grad(x):
        return compiled(x, data)

    def fun(x):
        v, g = value_and_grad(jnp.asarray(x))
        v, g = float(v), np.asarray(g, dtype=float)
        if not (np.isfinite(v) and np.all(np.isfinite(g))):
            return np.inf, np.zeros_like(g)  # L-BFGS-B backtracks from a non-finite point
        return v, g

    xs, values = [], []
    for x0 in starts:
        x0 = np.asarray(x0, dtype=float)
        if not np.isfinite(fun(x0)[0]):
            xs.append(x0)
            values.append(np.inf)
            continue
        res = optimize.minimize(
            fun, x0, jac=True, method="L-BFGS-B", options=dict(maxiter=max_iter, gtol=gtol)
        )
        xs.append(res.x)
        values.append(float(res.fun) if np.isfinite(res.fun) else np.inf)
    values = np.asarray(values)
    best = int(np.argmin(values))
    if not np.isfinite(values[best]):
        raise ValueError(
            "the log density is not finite at any of the "
            f"{num_starts} starting points of the mode search; at the prior median: "
            + _site_values(functions, median)
            + ". Check the data (duplicated rows with zero noise, constant columns) and "
            "the kernel's fixed values."
        )
    x = xs[best]
    return MapResult(
        unravel(jnp.asarray(x)), float(values[best]), _hessian(fun, x), values, value_and_grad
    )


def _hessian(fun: Callable, x: np.ndarray) -> np.ndarray:
    r"""Hessian at ``x`` by central differences of the gradient ``fun(x)[1]``.

    Column :math:`j` is :math:`(g(x + h_je_j) - g(x - h_je_j)) / 2h_j` with
    :math:`h_j = 10^{-4}\max(1, |x_j|)`, symmetrized. Rounding noise :math:`\delta` in the
    gradient (a sum over many rows, an ill-conditioned factor) errs the difference by about
    :math:`\delta / h`; at a mode, a matrix that is not positive definite is taken for that
    noise, and the steps grow tenfold, up to :math:`10^{-2}\max(1, |x_j|)` (the last result
    is kept; a flat or saddle direction then meets the floor of :func:`_inverse_hessian`).
    """
    for scale in (1e-4, 1e-3, 1e-2):
        h = scale * np.maximum(1.0, np.abs(x))
        cols = [
            (fun(x + h[j] * e)[1] - fun(x - h[j] * e)[1]) / (2 * h[j])
            for j, e in enumerate(np.eye(len(x)))
        ]
        H = np.column_stack(cols)
        if not np.all(np.isfinite(H)):
            return np.eye(len(x))
        H = 0.5 * (H + H.T)
        if np.linalg.eigvalsh(H)[0] > 0:
            break
    return H


def _inverse_hessian(H: np.ndarray, floor: float = 1e-2) -> np.ndarray:
    """Invert the Hessian with its eigenvalues floored at ``floor``.

    A saddle direction or a flat one gets posterior standard deviation at most
    ``floor**-0.5`` = 10 on the unconstrained scale.
    """
    lam, V = np.linalg.eigh(H)
    lam = np.maximum(lam, floor)
    return (V / lam) @ V.T


def laplace_inits(
    map_result: MapResult, rng_key, num_chains: int, scale: float = 1.0
) -> tuple[dict, np.ndarray]:
    """One start per chain drawn from the Laplace approximation :math:`N(z^*, H^{-1})`.

    A draw with a non-finite potential is pulled halfway towards the mode, up to ten times
    (then the mode itself). Returns ``(init_params, inverse_mass_matrix)``: the starts with
    a leading chain axis and :math:`H^{-1}` (eigenvalues floored, see
    :func:`_inverse_hessian`).
    """
    flat, unravel = ravel_pytree(map_result.z)
    cov = _inverse_hessian(map_result.hessian)
    lam, V = np.linalg.eigh(cov)
    root = V * np.sqrt(np.maximum(lam, 0.0))
    eps = np.asarray(jax.random.normal(as_key(rng_key), (num_chains, flat.shape[0])))
    rows = []
    for e in eps:
        step = scale * root @ e
        for _ in range(10):
            if np.isfinite(float(map_result.value_and_grad(flat + step)[0])):
                break
            step = 0.5 * step
        else:
            step = np.zeros_like(step)
        rows.append(np.asarray(flat) + step)
    inits = jax.vmap(unravel)(jnp.asarray(np.stack(rows)))
    return inits, cov
