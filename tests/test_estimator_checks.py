"""scikit-learn's estimator contract on the Bayesian GP estimators (tiny sampler settings)."""

from sklearn.utils.estimator_checks import parametrize_with_checks

import bayeskern as bk

TINY = dict(num_warmup=3, num_samples=3, num_chains=1, progress_bar=False, random_state=0)

# Checks that cannot apply to a 3-draw MCMC fit, with the reason.
EXPECTED_FAILED = {
    # a handful of NUTS draws cannot reach the accuracy thresholds these checks demand;
    # accuracy is tested with real sampler settings in test_gp.py
    "check_regressors_train": "3 NUTS draws are not a converged fit",
    "check_classifiers_train": "3 NUTS draws are not a converged fit",
    "check_regressor_data_not_an_array": "3 NUTS draws are not a converged fit",
    "check_classifier_data_not_an_array": "3 NUTS draws are not a converged fit",
}


def _expected(est):
    return EXPECTED_FAILED


@parametrize_with_checks([bk.GPRegressor(**TINY), bk.GPClassifier(**TINY)],
                         expected_failed_checks=_expected)
def test_sklearn_contract(estimator, check):
    check(estimator)
