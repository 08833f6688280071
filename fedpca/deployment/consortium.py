"""A demonstration consortium for secure sums: every site's secure-aggregation key, the
roster, and a policy per site that joins fedpca's verifiable secure aggregation.

At real sites these are separate steps by separate people (``deploy/README.md``): each site
makes its key (``fedpca deploy secagg-key``) and its policy (``fedpca site init``), the
consortium writes the roster (``fedpca deploy roster``) and hands it to every member. This
module does all of them in one folder, for ``fedpca deploy local``-style demonstrations,
tests and benchmarks on one machine.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

from fedpca.algorithms.specs import SPECS
from fedpca.errors import ConfigurationError
from fedpca.site.policy import DEFAULT_ROUNDS
from fedpca.site.policy_template import (
    TEMPLATE_EPSILON,
    TEMPLATE_RUN_EPSILON,
    worst_cases,
    write_policy_template,
)
from fedpca.secure.roster import write_roster, write_signing_key

#: The template's delta (``fedpca site init``'s default).
DELTA = 1e-7


def write_consortium(
    folder: str | Path, names: Sequence[str], data: Sequence[str | Path], *, min_sites: int,
    colluders: int = 0, consortium: str = "demo-consortium",
    contract: str | Path | None = None,
) -> list[Path]:
    """One policy per site (``folder/NAME/policy.toml``: the template of ``fedpca site init``
    with ``min-sites`` (its secure sums are distributed discrete Gaussian residues),
    ``colluders``, its own key and the shared roster, and
    a worst-case epsilon of the template's lifetime at that ``M``, rounded up; a
    demonstration runs several times a day, so its daily and weekly ceilings are the
    lifetime budget; ``contract``: the consortium's data contract every site's table is
    read through); returns the policy paths in ``names`` order."""
    if len(names) != len(data) or len(set(names)) != len(names):
        raise ConfigurationError("write_consortium needs one distinct name per data file")
    folder = Path(folder)
    keys = {name: write_signing_key(folder / name, name, consortium) for name in names}
    roster = write_roster(folder / "roster.toml", consortium,
                          {name: entry for name, (_, entry) in keys.items()})
    # a demonstration's one operator made every key: each site vouches for every member
    vouched = json.dumps([entry.fingerprint for _, entry in keys.values()])
    releases = SPECS["dps-pca"].releases_per_run(DEFAULT_ROUNDS)
    (case,) = worst_cases(TEMPLATE_EPSILON, TEMPLATE_RUN_EPSILON, DELTA, releases, (min_sites,))
    policies = []
    for name, records in zip(names, data):
        policy = write_policy_template(folder / name / "policy.toml", name,
                                       str(Path(records).resolve()), delta=DELTA,
                                       contract=(None if contract is None
                                                 else str(Path(contract).resolve())),
                                       daily_epsilon=TEMPLATE_EPSILON,
                                       weekly_epsilon=TEMPLATE_EPSILON)
        text = (policy.read_text()
                .replace("min-sites = 0", f"min-sites = {min_sites}")
                .replace('# roster = "roster.toml"', f'roster = "{roster.resolve()}"')
                .replace('# signing-key = "secagg.pem"', f'signing-key = "{keys[name][0]}"')
                .replace("# colluders = 0", f"colluders = {colluders}")
                .replace("# vouched = []", f"vouched = {vouched}"))
        policy.write_text(re.sub(r"# worst-case-epsilon = \S+",
                                 f"worst-case-epsilon = {math.ceil(case.lifetime_epsilon)}",
                                 text))
        policies.append(policy)
    return policies
