"""A site's yes to a run's readiness round: its name and public facts about the run as it
planned it.

Before any release every site is asked whether it is ready for the whole run (its policy
allows it, the whole plan fits its ledger, its table passes its contract). A site that is
says so with a :class:`SiteReady`; one that is not answers with its refusal (fixed words, no
number derived from its records). What a ready site states is public under its policy: its
name, its record count (public under replace-one neighbouring, and sent with every answer
anyway), the privacy settings its policy calibrates the run with (the run_config keys a
real site never takes from the coordinator: they are stated in every answer's guarantee
too) and how long it may take to answer one request. The coordinator uses them to run
with the sites' own settings (a secure sum needs every site's and the server's grid to
agree) and to wait long enough for the slowest site; none of them can change what a site
does, which only its own policy decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: A value a site states (a run_config value).
Setting = bool | int | float | str


@dataclass(frozen=True)
class SiteReady:
    """A site's yes to the readiness round.

    Attributes:
        site: the site's name.
        records: its record count (``None``: not stated, e.g. a simulated partition).
        settings: its policy's privacy settings for this run, by run_config key
            (``epsilon``, ``delta``, ``secure-min-sites``, ...; empty: the site takes the
            run_config's, as a simulated partition does).
        answer_seconds: the longest the site may take to answer one request of the run
            (its policy's ``[limits] answer-seconds``; ``None``: not stated).
    """

    site: str
    records: int | None = None
    settings: Mapping[str, Setting] = field(default_factory=dict)
    answer_seconds: float | None = None
