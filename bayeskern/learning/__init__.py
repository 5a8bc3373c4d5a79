"""Learning code of the data-dependent kernels: the training functions that fit a kernel's state.

Layered above :mod:`bayeskern.kernels` (which hold fitted state and pure JAX Gram matrices)
and below the models. A training function, ``fit_<kernel>(kernel, X, y)``, takes the unfitted
kernel (its configuration, ``random_state`` included) and the data and returns a fitted copy;
:func:`fit_kernel` fits a whole kernel tree through the table of :mod:`bayeskern.learning.fit`,
and the estimators call it:

* :mod:`bayeskern.learning.fit`: :func:`fit_kernel`, and the composites and cheap fits
  (:func:`fit_sum_product`, :func:`fit_vsk`, :func:`fit_labrbf_features`,
  :func:`fit_mahalanobis_rbf`, :func:`fit_spectral_mixture`);
* :mod:`bayeskern.learning.labrbf`: LAB-RBF bandwidth training, :func:`fit_labrbf` (He et
  al. 2023, Algorithm 1);
* :mod:`bayeskern.learning.conformal`: Xiong's Fisher-ratio optimization of the conformal
  factor, :func:`fit_conformal` (Gu 2021);
* :mod:`bayeskern.learning.ckrbf`: the CkRBF partition and per-cell covariances,
  :func:`fit_ckrbf` (Czarnecki & Tabor 2014);
* :mod:`bayeskern.learning.vsk`: the VSK scaling functions' fits, :func:`fit_scaling` (naive
  Bayes, least squares; Campi et al. 2021).
"""

from bayeskern.learning import ckrbf, conformal, fit, labrbf, vsk
from bayeskern.learning.ckrbf import fit_ckrbf
from bayeskern.learning.conformal import fit_conformal
from bayeskern.learning.fit import (
    fit_kernel,
    fit_labrbf_features,
    fit_mahalanobis_rbf,
    fit_spectral_mixture,
    fit_sum_product,
    fit_vsk,
)
from bayeskern.learning.labrbf import fit_labrbf
from bayeskern.learning.vsk import (
    fit_callable_scaling,
    fit_column_scaling,
    fit_fixed_scaling,
    fit_linear_model_scaling,
    fit_naive_bayes_scaling,
    fit_parametric_scaling,
    fit_scaling,
    fit_stacked_scaling,
)

__all__ = [
    "ckrbf",
    "conformal",
    "fit",
    "labrbf",
    "vsk",
    "fit_kernel",
    # kernels, then the VSK scalings, alphabetically
    "fit_ckrbf",
    "fit_conformal",
    "fit_labrbf",
    "fit_labrbf_features",
    "fit_mahalanobis_rbf",
    "fit_spectral_mixture",
    "fit_sum_product",
    "fit_vsk",
    "fit_callable_scaling",
    "fit_column_scaling",
    "fit_fixed_scaling",
    "fit_linear_model_scaling",
    "fit_naive_bayes_scaling",
    "fit_parametric_scaling",
    "fit_scaling",
    "fit_stacked_scaling",
]
