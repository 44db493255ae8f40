"""Every module path and public name of the pre-subpackage layout still imports.

The lists are the ``__all__`` of each module before the reorganisation into
subpackages (git history); moved modules are aliases that warn once.
"""

import importlib
import warnings

import pytest

OLD_PUBLIC_NAMES = {
    'bayeskde': (
        'hmm', 'kernels', 'lowrank', 'meanmap', 'KernelDependencyEstimator',
        'KernelDependencyEstimatorCV', 'KNNDependencyEstimator', 'KernelPCA',
        'PolynomialKernelTransform', 'HyperkernelLearner', 'LearnedKernel',
        'TwinGP',
    ),
    'bayeskde.kpca': (
        'KPCAResult', 'kernel_pca', 'kpca_transform', 'KernelPCA', 'EIGENSOLVERS',
    ),
    'bayeskde.kde': (
        'KDEFit', 'LowRankKDEFit', 'SOLVERS', 'fit_kde', 'predict_kde_features',
        'ridge_solve', 'kernel_loss', 'KernelDependencyEstimator',
        'KNNDependencyEstimator',
    ),
    'bayeskde.kde_cv': (
        'PAPER_SIGMAS', 'PAPER_RIDGES', 'CVResult', 'kde_cv_losses',
        'knn_cv_losses', 'loss_matrix_from_kernel', 'kfold_indices',
        'input_gram_grid', 'select_and_predict_kde', 'select_and_predict_knn',
        'KernelDependencyEstimatorCV',
    ),
    'bayeskde.preimage': (
        'nearest_candidates', 'feature_weights', 'linear_preimage',
        'fixed_point_preimage', 'FixedPointResult',
    ),
    'bayeskde.tgp': (
        'CRITERIA', 'INITS', 'FORWARD_MODE_MAX_DIM', 'OutputKernel', 'KLState',
        'HSICState', 'TGPSolution', 'tgp_kl_state', 'tgp_hsic_state',
        'tgp_kl_energy', 'tgp_hsic_energy', 'tgp_minimize', 'Whitening',
        'truncated_whitening', 'linear_init_weights', 'gp_predict',
        'weighted_knn_predict', 'nearest_neighbors', 'tgp_predict_sharded',
        'TwinGP',
    ),
    'bayeskde.tgp_core': (
        'CRITERIA', 'OutputKernel', 'KLState', 'HSICState', 'TGPSolution',
        'tgp_kl_state', 'tgp_hsic_state', 'tgp_kl_energy', 'tgp_hsic_energy',
        'tgp_minimize', 'Whitening', 'truncated_whitening', 'linear_init_weights',
    ),
    'bayeskde.tgp_neighbors': (
        'DEFAULT_BLOCK_SIZE', 'nearest_neighbors', 'neighbor_indices',
    ),
    'bayeskde.tgp_baselines': (
        'gp_predict', 'weighted_knn_predict', 'cholesky_with_jitter',
    ),
    'bayeskde.hyperlearn': (
        'HYPERKERNELS', 'VARIANTS', 'HyperkernelQPResult', 'solve_hyperkernel_qp',
        'pair_labels', 'LearnedKernel', 'HyperkernelLearner',
    ),
    'bayeskde.infer': (
        'run_nuts', 'run_svi', 'SVIFit', 'to_inference_data', 'convergence_report',
        'check_convergence', 'summary', 'compare_models', 'save_inference_data',
        'load_inference_data', 'plot_trace', 'psis_log_weights',
        'drop_failed_chains',
    ),
    'bayeskde.sbc': (
        'SBCResult', 'sbc_rank_test', 'replicated_nuts', 'simulate_kernel_gp_part',
        'simulate_categorical_hmm',
    ),
    'bayeskde.learn': (
        'KernelHyperFit', 'fit_kernel_hyper', 'twin_gp_from_params',
        'bma_tgp_predict', 'bma_kde_predict', 'calibrate_temperature',
        'TGPPredictive', 'sample_tgp_predictive', 'sample_bma_tgp_predictive',
    ),
    'bayeskde.datasets': (
        'STRING_ALPHABET', 'STRING_TARGETS', 'StringPairs', 'DigitHalves', 'Digits',
        'make_string_pairs', 'load_digits_halves', 'load_digits_classification',
        'SShape', 'SSHAPE_NOISE', 'make_sshape', 'ARM_LINK_LENGTHS',
        'ARM_JOINT_LIMITS', 'ArmPose', 'arm_forward', 'arm_mirror_pose',
        'make_arm_pose',
    ),
    'bayeskde.sequences': (
        'SequenceDataset', 'TsDataset', 'two_class_hmms', 'make_hmm_classification',
        'exon_intron_hmms', 'make_exon_intron', 'read_ts', 'DNA_ALPHABET',
    ),
    'bayeskde.demo': (
        'PAPER_TABLE1', 'mean_se', 'run_strings_experiment',
        'format_strings_summary', 'plot_strings_experiment',
    ),
    'bayeskde.sshape_demo': (
        'run_sshape_demo', 'format_sshape_summary', 'plot_sshape_demo',
        'plot_degree_posterior', 'write_sshape_outputs',
    ),
    'bayeskde.distributed': (
        'device_mesh', 'sharded_batch_map', 'sharded_gram',
        'sharded_hmm_posteriors', 'initialize_distributed',
    ),
    'bayeskde.kernels': (
        'alignment', 'center_cross_kernel', 'center_diagonal', 'center_kernel',
        'centered_alignment', 'distance_to_kernel', 'frobenius', 'hsic',
        'kernel_distances', 'kernel_rbf_map', 'median_heuristic',
        'normalize_kernel', 'delta_kernel', 'gamma_to_sigma', 'linear_kernel',
        'polynomial_kernel', 'rbf_kernel', 'regression_kernel', 'sigma_to_gamma',
        'squared_distances', 'gaussian_hyperkernel', 'gaussian_hyperkernel_gram',
        'harmonic_hyperkernel', 'harmonic_hyperkernel_gram', 'wishart_hyperkernel',
        'wishart_hyperkernel_gram', 'KERNEL_NAMES', 'Kernel', 'make_kernel',
        'encode_strings', 'subsequence_diag', 'subsequence_kernel',
        'PolynomialKernelTransform', 'PSDProjection', 'TransformResult',
        'apply_transform', 'fit_polynomial_transform', 'hsic_matrix',
        'polynomial_basis', 'psd_projection',
    ),
    'bayeskde.kernels.base': (
        'squared_distances', 'rbf_kernel', 'polynomial_kernel', 'linear_kernel',
        'delta_kernel', 'regression_kernel', 'sigma_to_gamma', 'gamma_to_sigma',
    ),
    'bayeskde.kernels.transforms': (
        'BASES', 'DEFAULT_GEGENBAUER_LAMBDA', 'TransformResult', 'PSDProjection',
        'polynomial_basis', 'hsic_matrix', 'fit_polynomial_transform',
        'apply_transform', 'psd_projection', 'PolynomialKernelTransform',
    ),
    'bayeskde.lowrank': (
        'LOWRANK_KERNELS', 'blocked_col_means', 'blocked_diag', 'blocked_gram',
        'blocked_matmul', 'blocked_rmatmul', 'LowRankKPCA',
        'lowrank_kpca_transform', 'nystroem_kpca', 'randomized_kpca',
        'CENTER_METHODS', 'NystroemMap', 'RFFMap', 'nystroem_features',
        'nystroem_transform', 'rff_map', 'rff_transform', 'select_centers',
        'KRRFit', 'falkon', 'krr_predict', 'nystroem_krr',
    ),
    'bayeskde.lowrank.eigen': (
        'LowRankKPCA', 'nystroem_kpca', 'lowrank_kpca_transform', 'randomized_kpca',
    ),
    'bayeskde.hmm': (
        'CategoricalEmission', 'GaussianEmission', 'categorical_log_likelihoods',
        'gaussian_log_likelihoods', 'emission_log_likelihoods', 'HMMFilter',
        'HMMPosterior', 'forward_backward', 'forward_filter', 'viterbi',
        'FitResult', 'HMMParams', 'HMMSample', 'batch_posteriors', 'fit_hmm',
        'pad_sequences', 'sample_hmm',
    ),
    'bayeskde.meanmap': (
        'LatentMeanMapKernel', 'FisherScores', 'empirical_fisher_information',
        'fisher_kernel', 'fisher_scores', 'hmm_log_likelihood',
        'length_normalised_fisher_kernel', 'adapt_hmms', 'emission_pair_log_kernel',
        'hmm_log_kernel', 'hmm_log_kernel_gram', 'log_kernel_normalize',
        'categorical_gmmk', 'categorical_ppk', 'clique_mean_map_kernel',
        'empirical_mean_map_kernel', 'gaussian_gmmk', 'gaussian_ppk',
        'log_gaussian_gmmk', 'log_gaussian_ppk', 'log_hmm_product_kernel',
        'mean_map_gram', 'sequence_cliques', 'symbol_kernel_matrix',
        'LatentFeatures', 'continuous_emission_gram_exact',
        'continuous_latent_features', 'discrete_latent_features',
        'lmmk_diag_from_features', 'lmmk_gram_from_features',
        'relative_frobenius_error', 'rff_frequencies', 'rff_map',
        'state_kernel_matrix', 'taylor_dimension', 'taylor_map',
    ),
    'bayeskde.models': (
        'KernelHyperData', 'KernelHyperPrior', 'default_kernel_hyper_prior',
        'degree_terms', 'kernel_hyper_model', 'posterior_predictive_draw',
        'loo_log_likelihood', 'prepare_kernel_hyper_data', 'TGPEnergyBatch',
        'batch_energy', 'tgp_energy_batch', 'tgp_predictive_model',
        'BayesianHMMPrior', 'HMMSequences', 'check_hmm_data',
        'hmm_sequence_log_likelihoods', 'bayesian_hmm_model', 'hmm_draws',
        'relabel_draws', 'relabel_samples', 'posterior_latent_mean_map_gram',
        'posterior_generative_mean_map_gram', 'BayesianKDEGridPrior',
        'KDESpectra', 'kde_grid_bma_features', 'kde_spectra',
        'n_components_for_variance',
    ),
    'bayeskde.models.kde_gibbs': (
        'KDEGibbsPosterior', 'kde_grid_loo_losses', 'kde_gibbs_posterior',
    ),
    'bayeskde.models.kde_eigen': (
        'SOLVERS', 'KDESpectra', 'kde_spectra', 'n_components_for_variance',
    ),
    'bayeskde.models.kde_grid': ('BayesianKDEGridPrior', 'kde_grid_bma_features'),
}

#: Public names of the GP-evidence Bayesian KDE, which lost to the Gibbs
#: posterior and was removed (one model per idea), with the modules that held
#: them: reading one raises an ImportError naming the replacement.
REMOVED = {
    'bayeskde.models': (
        'BayesianKDEPrior', 'bayesian_kde_model', 'kde_bma_features',
        'scale_free_gp_logpdf', 'LIKELIHOODS', 'bayesian_kde_grid_model',
        'kde_grid_log_joint', 'kde_grid_loglik',
    ),
    'bayeskde.models.kde_continuous': (
        'BayesianKDEPrior', 'scale_free_gp_logpdf', 'bayesian_kde_model',
        'kde_bma_features',
    ),
    'bayeskde.models.kde_grid': (
        'LIKELIHOODS', 'kde_grid_loglik', 'kde_grid_log_joint',
        'bayesian_kde_grid_model',
    ),
}

MOVED = {"bayeskde.kde_cv", "bayeskde.preimage", "bayeskde.tgp_core",
         "bayeskde.tgp_neighbors", "bayeskde.tgp_baselines", "bayeskde.sbc",
         "bayeskde.sequences", "bayeskde.demo", "bayeskde.sshape_demo",
         "bayeskde.kernels.base", "bayeskde.lowrank.eigen",
         "bayeskde.models.kde_gibbs", "bayeskde.models.kde_eigen",
         "bayeskde.models.kde_grid", "bayeskde.models.kde_continuous"}


@pytest.mark.parametrize("path", sorted(OLD_PUBLIC_NAMES))
def test_old_path_exposes_the_same_names(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        mod = importlib.import_module(path)
        missing = [n for n in OLD_PUBLIC_NAMES[path] if not hasattr(mod, n)]
    assert not missing, f"{path} lost {missing}"


@pytest.mark.parametrize("path", sorted(MOVED))
def test_moved_module_warns_once_and_names_the_new_path(path):
    import sys

    from bayeskde import _compat

    sys.modules.pop(path, None)
    _compat._warned.discard(path)
    with pytest.warns(DeprecationWarning, match=r"has moved to bayeskde\."):
        importlib.import_module(path)
    sys.modules.pop(path, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        importlib.import_module(path)  # the second import does not warn again


@pytest.mark.parametrize("path", sorted(REMOVED))
def test_removed_names_raise_an_import_error_naming_the_replacement(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        mod = importlib.import_module(path)
    for name in REMOVED[path]:
        with pytest.raises(ImportError, match=rf"{path}\.{name}: .*lost to the "
                           r"Gibbs posterior.*kde_gibbs_posterior"):
            getattr(mod, name)
        with pytest.raises(ImportError, match="kde_gibbs_posterior"):
            exec(f"from {path} import {name}", {})
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        mod.no_such_name  # noqa: B018 - any other name is a plain AttributeError


def test_kept_kde_names_resolve_to_the_one_module():
    import bayeskde.models
    import bayeskde.models.kde

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from bayeskde.models.kde_gibbs import kde_gibbs_posterior
        from bayeskde.models.kde_grid import kde_grid_bma_features
    assert kde_gibbs_posterior is bayeskde.models.kde.kde_gibbs_posterior
    assert kde_grid_bma_features is bayeskde.models.kde_grid_bma_features


def test_moved_names_resolve_to_the_new_objects():
    import bayeskde.kpca
    import bayeskde.lowrank
    import bayeskde.tgp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from bayeskde.tgp_core import tgp_minimize

        from bayeskde.distributed import sharded_gram
        from bayeskde.lowrank import nystroem_kpca
    assert nystroem_kpca is bayeskde.kpca.nystroem_kpca
    assert sharded_gram is bayeskde.lowrank.sharded_gram
    assert tgp_minimize is bayeskde.tgp.tgp_minimize



def test_twin_gp_energy_batch_and_modes_are_the_core_objects():
    """The energy batch, the temperature rule and the modes moved into
    bayeskde.tgp (which imports neither the models nor learn); the old paths
    re-export the same objects."""
    import bayeskde.learn
    import bayeskde.learn.kernel_hyper
    import bayeskde.learn.modes
    import bayeskde.models
    import bayeskde.models.tgp
    import bayeskde.tgp

    for name in ("TGPEnergyBatch", "tgp_energy_batch", "point_energy",
                 "batch_energy", "batch_energy_many"):
        assert getattr(bayeskde.models.tgp, name) is getattr(bayeskde.tgp, name)
    for name in ("TGPEnergyBatch", "tgp_energy_batch", "point_energy",
                 "batch_energy"):
        assert getattr(bayeskde.models, name) is getattr(bayeskde.tgp, name)
    for name in ("Modes", "tgp_modes", "calibrate_temperature"):
        assert getattr(bayeskde.learn, name) is getattr(bayeskde.tgp, name)
    assert (bayeskde.learn.kernel_hyper.calibrate_temperature
            is bayeskde.tgp.calibrate_temperature)
    assert bayeskde.learn.modes.tgp_modes is bayeskde.tgp.tgp_modes
    assert bayeskde.learn.top_k_modes is bayeskde.learn.modes.top_k_modes
