r"""Hilbert-space basis of stationary kernels: fixed features whose weights carry the kernel.

A stationary kernel on the box :math:`\Omega = \prod_j [c_j - L_j, c_j + L_j]` is
approximated by the eigenfunctions of the Laplacian with Dirichlet boundary conditions
(Solin & Särkkä 2020, eqs. 56-57),

.. math:: k(x, x') \approx \sum_{i=1}^{M} S\big(\sqrt{\lambda_i}\big)\,
          \phi_i(x)\,\phi_i(x'),\qquad
          \phi_i(x) = \prod_{j=1}^{d} L_j^{-1/2}
          \sin\!\Big(\sqrt{\lambda_{ij}}\,(x_j - c_j + L_j)\Big),\quad
          \sqrt{\lambda_{ij}} = \frac{\pi\, i_j}{2 L_j},

with :math:`S` the kernel's spectral density in the convention of NumPyro's
``contrib.hsgp`` (:math:`k(\tau) = (2\pi)^{-d}\int S(\omega) e^{i\omega^\top\tau}d\omega`)
and the multi-indices :math:`(i_1, \dots, i_d)` those of the tensor grid
:math:`\{1..m_1\} \times \dots \times \{1..m_d\}` (NumPyro's ``eigenfunctions`` and
``sqrt_eigenvalues``, reused here) inside the ellipsoid
:math:`\sum_j \big((i_j - \tfrac12)/m_j\big)^2 \le 1` in two or three columns. Solin &
Särkkä (2020) keep the :math:`M` smallest eigenvalues rather than a grid; since :math:`m_j`
is chosen proportional to :math:`L_j/\ell_j` (below), the ellipsoid keeps the frequencies
:math:`\omega` with the smallest :math:`\lVert \omega \circ \ell\rVert`, where a
stationary kernel's spectral density is largest: every frequency of the grid's corners beyond
it has a smaller density than the largest frequency kept along each axis. It keeps about
:math:`\pi/4` of a 2-D grid and :math:`\pi/6` of a 3-D one, and each log-density evaluation
costs :math:`O(M^3)`. The features :math:`\phi` do not depend on any kernel
hyper-parameter; only the weights' prior variances :math:`S(\sqrt{\lambda_i})` do, so a
Gaussian-likelihood model sees its data only through :math:`\Phi^\top\Phi`,
:math:`\Phi^\top y` and :math:`y^\top y` (``models/hsgp.py``).

Additive terms of a kernel get their own block of features (:class:`HSGPDesign`):

* a stationary kernel with a spectral density: the basis above;
* :class:`~bayeskern.kernels.Linear`: the standardized columns themselves;
* :class:`~bayeskern.kernels.Periodic` with a fixed period :math:`p` (one input column):
  :math:`\exp(-2\sin^2(\pi\tau/p)/\ell^2) = \sum_{j\ge0} q_j \cos(2\pi j\tau/p)`, so the
  features :math:`\cos(2\pi j x/p)`, :math:`\sin(2\pi j x/p)` (:math:`j \le J`) with weight
  variances :math:`q_j` (Solin & Särkkä 2014's periodic expansion, Riutort-Mayol et al. 2023,
  section 3.2);
* a stationary kernel times such a periodic kernel: the row-wise tensor product of the two
  feature blocks, weight variances :math:`S(\sqrt{\lambda_i})\,q_j`.

Choosing the basis (:func:`choose_basis`) follows the empirical relations of
Riutort-Mayol et al. (2023, section 4.3) between the boundary factor :math:`c = L/S`
(:math:`S` the half-range of the inputs), the number of basis functions :math:`m` and the
length-scale :math:`\ell` they resolve: :math:`c \ge \max(1.2,\ k_c\,\ell/S)` and
:math:`m \ge k_m\, c\,S/\ell`, with :math:`(k_c, k_m)` = (3.2, 1.75) for the squared
exponential, (4.1, 2.65) for Matérn-5/2 and (4.5, 3.42) for Matérn-3/2
(:data:`FAMILY_RULES`). :func:`check_basis` inverts them after a fit: the basis resolves
length-scales in :math:`[k_m L/m,\ L/k_c]`.

The code is in three modules, whose public names (their ``__all__``) are all exported here:
:mod:`bayeskern.hsgp_basis` (the basis of one stationary kernel and the choice of its size),
:mod:`bayeskern.hsgp_design` (the feature blocks of a kernel's terms) and
:mod:`bayeskern.hsgp_checks` (the checks after a fit).
"""

from bayeskern import hsgp_basis, hsgp_checks, hsgp_design
from bayeskern.hsgp_basis import *  # noqa: F403
from bayeskern.hsgp_checks import *  # noqa: F403
from bayeskern.hsgp_design import *  # noqa: F403

__all__ = [*hsgp_basis.__all__, *hsgp_design.__all__, *hsgp_checks.__all__]
