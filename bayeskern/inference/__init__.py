"""The inference layer: every MCMC run of bayeskern goes through here.

* :mod:`bayeskern.inference.nuts` — NUTS (NumPyro) for the GP and spectral models: the mode
  search and Laplace-approximation start, the dense mass matrix, chains on all CPU devices.
* :mod:`bayeskern.inference.start` — where the chains start: a model's functions from one
  trace, the mode search and the Laplace-approximation starts.
* :mod:`bayeskern.inference.chains` — the chains of one NUTS fit advanced block by block
  through one compiled program.
* :mod:`bayeskern.inference.processes` — chains in worker processes (the Gibbs sampler's,
  whose sweeps cannot share one XLA:CPU runtime across devices).
* :mod:`bayeskern.inference.gabasr_gibbs` — the GaBaSR paper's Gibbs/Metropolis-Hastings sweep
  as a NumPyro ``MCMCKernel`` (:class:`GaBaSRGibbs`), run by ``numpyro.infer.MCMC``
  (:func:`gibbs_sample`).
* :mod:`bayeskern.inference.pg_basis` — Pólya-Gamma Gibbs for a Bernoulli-logit model on a
  fixed basis (``GPClassifier``'s Hilbert-space route): the weights drawn exactly, the
  hyper-parameters by Metropolis steps with the weights integrated out.
* :mod:`bayeskern.inference.whitening` — NUTS in Laplace-whitened coordinates for the GaBaSR
  random-feature models (MAP by Levenberg-Marquardt steps, then the inverse-Hessian square
  root as an affine preconditioner).
"""

from bayeskern._lazy import lazy_getattr as _lazy_getattr

#: public name -> the module that defines it, imported on first use (PEP 562, as the package
#: itself): a worker process of :mod:`bayeskern.inference.processes` imports this package
#: before its target, and should pay only for the modules that target needs
_LAZY = {
    **dict.fromkeys(["GaBaSRGibbs", "gibbs_sample"], "bayeskern.inference.gabasr_gibbs"),
    **dict.fromkeys(
        [
            "AUTO_BLOCK",
            "AUTO_MAX_SAMPLES",
            "check_factorizing_chain_method",
            "check_sampler_counts",
            "choose_chain_method",
            "run_nuts",
        ],
        "bayeskern.inference.nuts",
    ),
    **dict.fromkeys(
        ["MapResult", "ModelFunctions", "as_key", "find_map", "laplace_inits", "model_functions"],
        "bayeskern.inference.start",
    ),
}

__all__ = [
    "run_nuts",
    "AUTO_BLOCK",
    "AUTO_MAX_SAMPLES",
    "find_map",
    "laplace_inits",
    "model_functions",
    "MapResult",
    "ModelFunctions",
    "choose_chain_method",
    "check_sampler_counts",
    "check_factorizing_chain_method",
    "as_key",
    "GaBaSRGibbs",
    "gibbs_sample",
]


__getattr__ = _lazy_getattr(__name__, _LAZY)


def __dir__():
    return sorted(set(globals()) | set(__all__))
