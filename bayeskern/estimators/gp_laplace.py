"""How the embedded-Laplace GP classifier runs its chains.

In one process or, for long fits on a CPU, in worker processes that rebuild its model.
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np

from bayeskern.estimators.base import kernel_state, restore_kernel
from bayeskern.inference import AUTO_BLOCK, check_factorizing_chain_method
from bayeskern.inference.processes import can_start_processes
from bayeskern.models.gp import gp_classification_laplace, gp_classification_softmax, prepare_kernel

#: the chains' sequential work (``chains * iterations * classes * n**3``; one class for two)
#: from which the embedded-Laplace classifiers run their chains in processes on a CPU
LAPLACE_PROCESS_WORK = 2e9


def _laplace_model(config: str, arrays: dict):
    """Rebuild the embedded-Laplace classifier's model and arguments in a worker process.

    The builder of :func:`bayeskern.inference.run_nuts`'s ``rebuild``: ``config`` holds the
    fitted kernel's :meth:`~bayeskern.kernels.Kernel.get_config` and the number of classes,
    ``arrays`` the standardized inputs ``X``, labels ``y``, column scales ``x_scale`` and the
    kernel's fitted arrays (:func:`bayeskern.estimators.base.kernel_state`).
    """
    c = json.loads(config)
    kernel = restore_kernel(c["kernel"], arrays)
    X, x_scale = jnp.asarray(arrays["X"]), np.asarray(arrays["x_scale"])
    kwargs = dict(
        X=X,
        y=jnp.asarray(arrays["y"]),
        kernel=kernel,
        x_scale=x_scale,
        prepared=prepare_kernel(kernel, X, X, x_scale),
        newton_start=jnp.asarray(arrays["newton_start"]),
    )
    if c["n_classes"] > 2:
        return gp_classification_softmax, kwargs | dict(n_classes=c["n_classes"])
    return gp_classification_laplace, kwargs


class _LaplaceChainsMixin:
    """The chain method of the Laplace route of the GP classifier."""

    def _laplace_chains(self, Xs, y, n_classes: int) -> dict:
        """How the Laplace route's chains run when the user chose no ``chain_method``.

        On a CPU not one per device: jaxlib's LAPACK kernels hand their work to XLA:CPU's
        thread pool and wait for it, the pool's threads also run the devices' programs, and
        with chains on several devices at once every thread can end up waiting (the fit
        then blocks forever, even with two chains on two of four devices). So the chains run
        one after another, in one process per core (``"processes"``) when their work
        (:data:`LAPLACE_PROCESS_WORK`) pays for starting the processes, else in this one.
        Elsewhere JAX's default rule (:func:`bayeskern.inference.choose_chain_method`).
        Returns ``chain_method`` and ``rebuild`` for :meth:`_sample`; a user's
        ``"vectorized"`` or ``"parallel"`` that would block is refused
        (:func:`bayeskern.inference.check_factorizing_chain_method`).
        """
        check_factorizing_chain_method(self.chain_method, self.num_chains, parallel=True)
        try:
            config = json.dumps(dict(kernel=self.kernel_.get_config(), n_classes=n_classes))
        except TypeError:  # a kernel with a Python callable: not rebuilt in another process
            config = None
        rebuild = None
        if config is not None:
            arrays = dict(
                X=np.asarray(Xs),
                y=np.asarray(y),
                x_scale=np.asarray(self.x_std_.scale),
                newton_start=np.zeros((n_classes, len(y)) if n_classes > 2 else len(y)),
                **kernel_state(self.kernel_),
            )
            rebuild = ("bayeskern.estimators.gp_laplace:_laplace_model", config, arrays)
        if jax.default_backend() != "cpu":
            return dict(chain_method=None, rebuild=rebuild)
        warmup = self._warmup()
        # "auto" draws at least one block
        draws = AUTO_BLOCK if isinstance(self.num_samples, str) else self.num_samples
        work = (
            self.num_chains
            * (warmup + draws)
            * (n_classes if n_classes > 2 else 1)
            * float(len(y)) ** 3
        )
        processes = (
            rebuild is not None
            and self.num_chains > 1
            and work >= LAPLACE_PROCESS_WORK
            and can_start_processes()
        )
        return dict(chain_method="processes" if processes else "sequential", rebuild=rebuild)
