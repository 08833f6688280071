"""What kind of no a site's readiness refusal is: the fixed phrase each reason begins with.

A coordinator told that "0 site(s) can afford this run" when one site's export is broken and
another's policy takes no such run looks for the wrong fix. So a site's refusal of the
readiness round (:class:`~fedpca.site.service.Ready`) begins with one of three fixed phrases,
then ``": "`` and the site's own words:

* :data:`CANNOT_AFFORD` (``"cannot afford"``): the whole run does not fit the site's ledger
  (its lifetime budget, worst-case bound or a spending window:
  :class:`~fedpca.errors.BudgetExceededError`);
* :data:`REFUSED_DATA` (``"refused: data"``): the site's data file or export cannot be used
  (:class:`~fedpca.errors.InvalidDataError`; the reason stays in the site's log);
* :data:`REFUSED_POLICY` (``"refused: policy"``): the site's policy does not allow this run
  (its algorithm, mode, contract, seed, centring, start, secure identity or ledger identity:
  every other refusal of fedpca's own).

The kind says that it is a no, so the site's own words lose their leading ``refused:`` (after
the site's name, when they begin with it): ``refused: policy: hospital-a: ldp-pca is not ...``,
not ``refused: policy: hospital-a: refused: ldp-pca ...``.

A readiness reply that begins with none of them is
:data:`~fedpca.site.service.SITE_FAILURE` (a failure that is not one of fedpca's refusals).
:func:`refusal_kind` reads the phrase back, for a coordinator grouping its sites' refusals.
The phrases carry no data-derived number and no path: they are fixed words.
"""

from __future__ import annotations

import re

from fedpca.errors import BudgetExceededError, FedPCAError, InvalidDataError

#: The site cannot afford the whole run (its ledger).
CANNOT_AFFORD = "cannot afford"
#: The site's data file or export cannot be used.
REFUSED_DATA = "refused: data"
#: The site's policy does not allow this run.
REFUSED_POLICY = "refused: policy"
#: Every kind, in the order a coordinator reports them.
KINDS = (CANNOT_AFFORD, REFUSED_DATA, REFUSED_POLICY)


def kind_of(error: FedPCAError) -> str:
    """The kind of the site's refusal ``error`` (module docstring)."""
    if isinstance(error, BudgetExceededError):
        return CANNOT_AFFORD
    if isinstance(error, InvalidDataError):
        return REFUSED_DATA
    return REFUSED_POLICY


#: A site's own ``refused: `` at the start of its words, or after its name (``NAME: ``).
_OWN_REFUSED = re.compile(r"^((?:[^:\s][^:]*: )?)refused: ")


def with_kind(error: FedPCAError, reason: str) -> str:
    """``reason`` (the refusal's public text) led by the kind of ``error``, its own leading
    ``refused:`` dropped (module docstring)."""
    words = _OWN_REFUSED.sub(r"\1", reason, count=1)
    return f"{kind_of(error)}: {words}"


def refusal_kind(reason: str) -> str | None:
    """The kind a site's readiness refusal ``reason`` begins with (``None``: none, the
    site's failure)."""
    return next((kind for kind in KINDS if reason.startswith(f"{kind}: ")), None)
