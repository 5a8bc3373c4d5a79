"""Learning code of the data-dependent kernels: the training loops that fit a kernel's state.

Layered above :mod:`bayeskern.kernels` (which hold fitted state and pure JAX Gram matrices)
and below the models. Each module registers its training function for a kernel class
(:func:`bayeskern.kernels.base.register_learner`), so ``kernel.fit(X, y)`` keeps working:

* :mod:`bayeskern.learning.labrbf`: LAB-RBF bandwidth training (He et al. 2023, Algorithm 1);
* :mod:`bayeskern.learning.conformal`: Xiong's Fisher-ratio optimization of the conformal
  factor (Gu 2021);
* :mod:`bayeskern.learning.ckrbf`: the CkRBF partition and per-cell covariances
  (Czarnecki & Tabor 2014);
* :mod:`bayeskern.learning.vsk`: the VSK scaling functions' fits (naive Bayes, least
  squares; Campi et al. 2021).
"""

from bayeskern.learning import ckrbf, conformal, labrbf, vsk

__all__ = ["ckrbf", "conformal", "labrbf", "vsk"]
