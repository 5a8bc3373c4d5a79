"""The priors table of the uncertainty report, read from the fitted model itself.

The NumPyro model an estimator sampled is replayed once under
``numpyro.handlers.trace(numpyro.handlers.seed(model, 0))`` on the training data it was
fitted on; every latent ``sample`` site (kernel hyper-parameters, amplitudes, noise, bias,
whitened latent values...) is listed with its distribution and parameters as the model
declares them, so the table cannot drift from the code. For an estimator whose model this
module does not know, the posterior variables are listed with the kernel's declared priors
where it has them.
"""

from __future__ import annotations

from functools import partial

import jax.numpy as jnp
import numpy as np
import numpyro
from numpyro import distributions as dist

from bayeskern.estimators.gp import GPClassifier, GPRegressor
from bayeskern.models.gp import (
    gp_classification,
    gp_classification_laplace,
    gp_classification_softmax,
    gp_regression,
    prepare_kernel,
)
from bayeskern.models.hsgp import hsgp_classification, hsgp_regression
from bayeskern.models.sgpr import sgpr_regression

__all__ = ["model_call", "latent_sites", "prior_rows", "dist_repr"]


def model_call(est):
    """Return ``(model, kwargs)`` that replays the NumPyro model ``est`` sampled, or ``None``.

    Known: :class:`~bayeskern.GPRegressor` (exact, Hilbert-space basis, inducing points) and
    :class:`~bayeskern.GPClassifier` (both inference routes, and the basis), on the
    standardized training data stored in ``idata_``.
    """
    if (
        not isinstance(est, (GPRegressor, GPClassifier))
        or "constant_data" not in est.idata_.groups()
    ):
        return None
    x_scale = est.x_std_.scale
    X = jnp.asarray(est.x_std_.transform(np.asarray(est.idata_.constant_data["X"])))
    y = np.asarray(est.idata_.observed_data["y"])
    if isinstance(est, GPRegressor):
        if getattr(est, "approximation_", "exact") == "hsgp":
            return hsgp_regression, dict(
                stats=est._hsgp_stats, kernel=est.kernel_, design=est.hsgp_design_, x_scale=x_scale
            )
        if getattr(est, "approximation_", "exact") == "inducing":
            return sgpr_regression, dict(
                X=X,
                y=jnp.asarray(est.y_std_.transform(y)),
                kernel=est.kernel_,
                x_scale=x_scale,
                Z=est._inducing_Z(),
                chunk_size=est._inducing_chunk(),
            )
        model, y = gp_regression, est.y_std_.transform(y)
    elif getattr(est, "approximation_", "exact") == "hsgp":
        # the basis classifier's model with its bias and whitened weights as sites
        return hsgp_classification, dict(
            X=X,
            y=jnp.asarray(y, float),
            kernel=est.kernel_,
            design=est.hsgp_design_,
            x_scale=x_scale,
        )
    elif len(est.classes_) > 2:
        model, y = partial(gp_classification_softmax, n_classes=len(est.classes_)), y.astype(int)
    else:
        laplace = getattr(est, "inference", "latent") == "laplace"  # runs saved before it: latent
        model = gp_classification_laplace if laplace else gp_classification
        y = y.astype(float)
    return model, dict(
        X=X,
        y=jnp.asarray(y),
        kernel=est.kernel_,
        x_scale=x_scale,
        prepared=prepare_kernel(est.kernel_, X, X, x_scale),
    )


def latent_sites(model, kwargs) -> dict:
    """Return ``{name: (distribution, value shape)}`` of the latent sample sites of a model.

    One run of ``model(**kwargs)`` under NumPyro's ``seed`` and ``trace`` handlers; observed
    sites (the likelihood, factors) are left out.
    """
    tr = numpyro.handlers.trace(numpyro.handlers.seed(model, 0)).get_trace(**kwargs)
    return {
        name: (site["fn"], tuple(np.shape(site["value"])))
        for name, site in tr.items()
        if site["type"] == "sample" and not site["is_observed"]
    }


def dist_repr(d) -> str:
    """``Name(param=value, ...)`` of a NumPyro distribution; batch/event wrappers unwrapped.

    ``Independent`` and ``ExpandedDistribution`` add only a shape (shown by the caller);
    parameters are rounded to 4 decimals, long arrays summarized by their range.
    """
    while isinstance(d, (dist.Independent, dist.ExpandedDistribution)):
        d = d.base_dist
    if isinstance(d, dist.TransformedDistribution):  # a prior sampled on another scale
        names = [
            f"inverse {type(t.inv).__name__}"
            if type(t).__name__ == "_InverseTransform"
            else type(t).__name__
            for t in d.transforms
        ]
        return f"{dist_repr(d.base_dist)} through {', '.join(names)}"
    params = []
    for k in d.arg_constraints:
        if not hasattr(d, k):
            continue
        v = np.asarray(getattr(d, k))
        if v.size > 6:
            text = f"[{v.min():.4g} … {v.max():.4g}] ({v.size} values)"
        else:
            text = str(v.round(4).tolist())
        params.append(f"{k}={text}")
    return f"{type(d).__name__}({', '.join(params)})"


def _kernel_specs(est) -> dict:
    """Prior text of the kernel's hyper-parameters, keyed by site (the kernel's declaration)."""
    out = {}
    kernel = getattr(est, "kernel_", None)
    leaves = kernel.leaves() if hasattr(kernel, "leaves") else []
    for leaf in leaves:
        for p, h in leaf.hyperparameters().items():
            out[leaf._site(p)] = (
                f"fixed at {h.value} (data units)"
                if h.value is not None
                else f"{dist_repr(h.prior())}{' per input column' if h.ard else ''}"
            )
    return out


def prior_rows(est) -> tuple[list[tuple[str, str, str]], str]:
    """Rows ``(site, prior, shape)`` of the priors table of a fitted Bayesian estimator, and a note.

    Sites traced from the model (:func:`model_call`, :func:`latent_sites`), in the model's
    order, on the standardized scale the model samples on; then the kernel's fixed
    hyper-parameters (not sampled). For an estimator whose model is not known here: every
    posterior variable, with the kernel's declared prior where there is one.
    """
    specs = _kernel_specs(est)
    call = model_call(est)
    rows = []
    if call is not None:
        for name, (d, shape) in latent_sites(*call).items():
            rows.append((name, dist_repr(d), "scalar" if not shape else "×".join(map(str, shape))))
        rows += [(s, v, "—") for s, v in specs.items() if v.startswith("fixed")]
        return rows, (
            "read from the model (NumPyro trace of its sample sites), on the "
            "standardized scale it samples on"
        )
    post = est.idata_.posterior
    for v in post.data_vars:
        shape = tuple(post[v].shape[2:])
        rows.append(
            (
                v,
                specs.get(v, "(the model's prior: not traced for this estimator)"),
                "scalar" if not shape else "×".join(map(str, shape)),
            )
        )
    rows += [(s, v, "—") for s, v in specs.items() if v.startswith("fixed")]
    return rows, "posterior variables of the run; priors from the kernel where it declares them"
