"""Offline datasets used by the papers that bayeskern implements.

Everything loads without network access and needs only numpy, pandas and scikit-learn:
small tables are embedded in ``bayeskern/datasets/data/`` (with a sha256 ``MANIFEST.json``
checked at every load, and source/licence notes in ``SOURCES.md``); ``breast_cancer`` and
``diabetes`` come from scikit-learn's bundled copies. The embedded files are rebuilt by
``benchmarks/build_datasets.py``.

>>> from bayeskern import datasets
>>> datasets.list_datasets()  # doctest: +NORMALIZE_WHITESPACE
['airfoil', 'boston', 'breast_cancer', 'co2', 'co2_weekly', 'diabetes', 'eeg_eye_state',
 'parkinsons', 'pima', 'wisconsin_original']
>>> X, y = datasets.load_dataset("pima")
>>> X.shape, y.dtype
((768, 8), dtype('int64'))

No dataset here comes from Gu (2021), which follows Xiong et al.'s conformal kernel: its GDC
gene-expression data are not redistributable; any binary classification set above serves to
exercise that kernel.
"""

from ._registry import DataIntegrityError, co2_split, describe, list_datasets, load_dataset

__all__ = ["DataIntegrityError", "co2_split", "describe", "list_datasets", "load_dataset"]
