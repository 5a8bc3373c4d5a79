"""NumPyro's NUTS on a potential that takes the data as an argument, as :class:`Chains`.

The pieces that :func:`bayeskern.inference.nuts.run_nuts` and its worker processes
(:mod:`bayeskern.inference.nuts_processes`) both build their chains from: the data enter the
compiled programs as inputs, so that fits of data sets of the same shape share them.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
from numpyro.infer import NUTS
from numpyro.infer.hmc import hmc

from bayeskern.inference.chains import Chains

__all__ = ["DataArgumentNUTS", "nuts_chains", "transition_counts"]


class DataArgumentNUTS(NUTS):
    """NumPyro's NUTS on a potential that takes the data as its one model argument.

    ``potential_gen(data)`` is the potential of the model on ``data`` (NumPyro's
    ``potential_fn_gen`` route, used by its model-based NUTS): :class:`Chains` passes the
    data into its compiled programs as inputs, so fits of data sets of the same shape share
    their programs (and JAX's persistent compilation cache, where enabled, holds them across
    processes). The initial state is computed inside :class:`Chains`' compiled ``init``
    program, not op by op as NumPyro's ``HMC.init`` does for one chain outside ``jit``.
    """

    def __init__(self, potential_gen: Callable, postprocess_gen: Callable, **kwargs):
        self._potential_gen = potential_gen
        self._postprocess_gen = postprocess_gen
        super().__init__(potential_fn=potential_gen, **kwargs)

    def _init_state(self, rng_key, model_args, model_kwargs, init_params):
        if self._init_fn is None:
            self._init_fn, self._sample_fn = hmc(
                potential_fn_gen=self._potential_gen, kinetic_fn=self._kinetic_fn, algo=self._algo
            )
            self._potential_fn_gen = self._potential_gen
            self._postprocess_fn = self._postprocess_gen
        return init_params


def nuts_chains(functions, settings: dict, inverse_mass, **chains) -> Chains:
    """Build the :class:`Chains` of NumPyro's NUTS with ``settings`` on the model ``functions``.

    ``inverse_mass``: the starting inverse mass matrix (``None``: NumPyro's identity);
    ``chains``: :class:`Chains`' keyword arguments.
    """
    kernel = DataArgumentNUTS(
        functions.potential_gen,
        functions.postprocess_gen,
        inverse_mass_matrix=None if inverse_mass is None else jnp.asarray(inverse_mass),
        **settings,
    )
    return Chains(kernel, functions.postprocess_gen, functions.data, **chains)


def transition_counts(total: int, step: int) -> list[int]:
    """``total`` transitions as calls of at most ``step`` each."""
    return [step] * (total // step) + ([total % step] if total % step else [])
