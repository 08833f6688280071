"""Exceptions raised by fedpca. Every message says what was wrong and how to fix it."""


class FedPCAError(Exception):
    """Base class of every error fedpca raises on purpose."""


class InvalidDataError(FedPCAError, ValueError):
    """A site's data cannot be used (shape, dtype, non-finite values, empty)."""


class InvalidRequestError(FedPCAError, ValueError):
    """A server request was refused before anything was released."""


class BudgetExceededError(FedPCAError):
    """A release was refused because it would exceed the site's privacy budget."""


class ConfigurationError(FedPCAError, ValueError):
    """A parameter is out of range or inconsistent with another."""


class NotFittedError(FedPCAError, ValueError, AttributeError):
    """An estimator was used before ``fit`` (like scikit-learn's NotFittedError)."""
