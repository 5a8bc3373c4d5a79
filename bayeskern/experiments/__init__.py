r"""The papers' experiments: helpers that reproduce a study, not needed to fit a model.

* :mod:`bayeskern.experiments.tuning` — how easy a kernel is to tune: the
  :math:`P_f(\alpha)` curve and its area over an SVM's :math:`(C, \gamma)` grid
  (Czarnecki & Tabor 2014, section 5), the measure of the CkRBF paper.
* :mod:`bayeskern.experiments.vsk` — the VSK paper's grid and feature selection (Campi et al.
  2021, sections 6.1 and 7), and :func:`~bayeskern.experiments.vsk.compare_vsk`, the Bayesian
  comparison of a kernel with its variably scaled version.
* :mod:`bayeskern.experiments.conditioning` — the VSK paper's sweep of the shape parameter
  (section 6.2, Fig. 2): condition number and test error along a grid.

The estimators, kernels and models never import this package; it sits above them.
"""

from bayeskern.experiments.conditioning import shape_sweep
from bayeskern.experiments.tuning import (
    grid_scores,
    pf_auc,
    pf_curve,
    pf_table,
    precomputed_grid_scores,
    score_table,
    window_wins,
)
from bayeskern.experiments.vsk import compare_vsk, make_svm_selector, paper_param_grid

__all__ = [
    "compare_vsk",
    "grid_scores",
    "make_svm_selector",
    "paper_param_grid",
    "pf_auc",
    "pf_curve",
    "pf_table",
    "precomputed_grid_scores",
    "score_table",
    "shape_sweep",
    "window_wins",
]
