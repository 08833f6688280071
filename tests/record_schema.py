"""The run record's keys, as docs/api.md "Result JSON" documents them: ``fedpca simulate
--output`` and the Flower App's ``output`` are both checked against these sets."""

HEADLINE = {
    "algorithm", "status", "sites", "samples", "dim", "k", "epsilon", "delta", "accounting",
    "noise_multiplier", "noise_sampler", "sigma", "epsilon_achieved", "epsilon_worst_case", "site_guarantees",
    "request", "trust_model", "seed", "rounds",
    "flower_rounds", "epsilon_spent", "wall_seconds",
}
ALGORITHM = {
    "dps-pca": {"sparsity", "s_hat", "secure_min_sites", "subspace_distance", "distances"},
    "dpdis-pca": {
        "dataset", "r", "weighting", "variant", "energy_ratio", "bytes_per_site",
        "bytes_full_matrix",
    },
    "ldp-pca": {
        "dataset", "sparse", "subspace_distance", "distance_reference", "energy_ratio",
        "clipped_rows",
    },
    "sulq-kplane": {
        "clusters", "subspace_dim", "noise", "cost", "wasserstein_distance", "costs",
        "wasserstein_distances",
    },
}
#: Only a sparse (Fantope) LDP-PCA run has these.
LDP_SPARSE = {
    "lam", "support_size", "support_precision", "support_recall", "admm_iterations",
    "admm_converged",
}
PCA_RESULT = {
    "basis", "privacy", "history", "config", "sites_answered", "columns", "explained_variance",
    "explained_variance_ratio", "loadings",
}
#: A centred run's (over tables and a contract) too.
CENTRED = {"mean", "scale"}
#: A centred PCA run's: whether its explained-variance ratio is over floored scales.
CENTRED_PCA = CENTRED | {"explained_variance_ratio_floored"}
#: A centred clustering's too (a PCA result has its columns already).
CENTRED_CLUSTERING = CENTRED | {"columns"}
#: The record of a run that stopped before its result.
FAILURE = {"algorithm", "status", "error", "site_failures"}
CLUSTERING_RESULT = {"bases", "assignments", "privacy", "history", "config"}


def record_keys(algorithm: str, sparse: bool = False, centred: bool = False) -> set[str]:
    """Every top-level key of ``algorithm``'s record (``sparse``: an LDP-PCA Fantope run;
    ``centred``: a centred run over tables)."""
    clustering = algorithm == "sulq-kplane"
    result = CLUSTERING_RESULT if clustering else PCA_RESULT
    scaling = CENTRED_CLUSTERING if clustering else CENTRED_PCA
    return (HEADLINE | ALGORITHM[algorithm] | result | (LDP_SPARSE if sparse else set())
            | (scaling if centred else set()))


def all_documented_keys() -> set[str]:
    """Every key any record can have."""
    return (HEADLINE | LDP_SPARSE | PCA_RESULT | CLUSTERING_RESULT | FAILURE | CENTRED_PCA
            | CENTRED_CLUSTERING | set().union(*ALGORITHM.values()))
