"""What a fedpca request and a site's answer contain, in Flower's two message formats.

Both sides read this module: the strategies build requests and decode answers with it, the
sites' ClientApp (:mod:`fedpca.flower.site.clientapp`) reads requests and builds answers with it
(from the Flower-free requests and replies of :mod:`fedpca.site.service`).

* Legacy format (``flwr.server.strategy`` strategies, :mod:`fedpca.flower.server.legacy_strategy`):
the
  request is a ``FitIns`` (records ``fitins.parameters`` / ``fitins.config``), the answer a
  ``FitRes``; the site's name, epsilon spent and release count travel in its metrics.
* The readiness round (before round 1, :mod:`fedpca.flower.server.readiness`), in either
  API: a QUERY :class:`~flwr.app.Message` whose content is the ConfigRecord ``"readiness"``
  (:func:`readiness_question`); a site that is ready for the whole run answers with the
  ConfigRecord ``"readiness"`` holding its name, ``ready = True`` and what it states about
  the run (:class:`~fedpca.site.ready.SiteReady`: its record count, its policy's settings
  as ``setting.KEY``, its answer deadline), one that is not with an error, its refusal.
* Message API (``flwr.serverapp.strategy`` strategies): the request is a train
  :class:`~flwr.app.Message` whose content is exactly an :class:`~flwr.app.ArrayRecord`
  ``"arrays"`` and a :class:`~flwr.app.ConfigRecord` ``"config"``; the answer carries the
  release as the ArrayRecord ``"arrays"``, the public numbers (record count
  ``"num-examples"``, ``"epsilon_spent"``, ``"releases"``) as the MetricRecord ``"metrics"``
  and the site's name and guarantee (:class:`~fedpca.dp.guarantee.SiteGuarantee`, keys
  ``guarantee.*``: its accounting is text) in the ConfigRecord ``"site"``. The same
  :class:`SiteAnswer` comes out of either format.

Privacy: an answer holds the site's noisy release and what is public under its policy (its
name, its record count under replace-one neighbouring, what its ledger has spent, the
guarantee its policy gives), in either format; every request field is untrusted and is
checked by the site before anything is spent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from flwr.common import FitRes, Scalar, parameters_to_ndarrays

from fedpca.algorithms.site import SiteAnswer
from fedpca.site.answer import RECORDS, Answer
from fedpca.errors import FedPCAError, InvalidRequestError, quoted
from fedpca.dp.guarantee import PREFIX as GUARANTEE, SiteGuarantee
from fedpca.site.ready import SiteReady

#: Message API: the request's and the answer's arrays.
ARRAYS = "arrays"
#: Message API: the request's config.
CONFIG = "config"
#: Message API: the answer's public numbers.
METRICS = "metrics"
#: Message API: the answer's ConfigRecord holding the site's name (a string is no metric).
SITE = "site"
#: The record count, under Flower's usual name for it.
NUM_EXAMPLES = "num-examples"
#: Legacy format: the request's config record (Flower's ``FitIns`` encoding).
LEGACY_CONFIG = "fitins.config"
#: The readiness round: the question's and the answer's ConfigRecord, and the answer's yes.
READINESS, READY = "readiness", "ready"
#: The readiness answer's key of a site's answer deadline, and the prefix of its settings.
ANSWER_SECONDS, SETTING = "answer-seconds", "setting."


def readiness_question() -> RecordDict:
    """The readiness round's question, a QUERY message's content: "is this site ready for
    the whole of this run?". It carries nothing a site uses: each site answers for the run as
    its own policy calibrates it, from its policy and ledger alone."""
    return RecordDict({READINESS: ConfigRecord({"question": "whole-run"})})


def read_readiness_question(content: RecordDict) -> None:
    """Refuse a query that is not the readiness question (untrusted content)."""
    if set(content) != {READINESS} or not isinstance(content.get(READINESS), ConfigRecord):
        raise InvalidRequestError(
            f"refused: the only question a site answers is the readiness round's (a ConfigRecord "
            f"{READINESS!r}), got records {quoted(sorted(content))}"
        )


def readiness_answer(ready: SiteReady) -> RecordDict:
    """A site's yes to the readiness round, with what it states about the run
    (:class:`~fedpca.site.ready.SiteReady`); a no is the reply's error: the site's
    refusal."""
    stated: dict[str, Scalar] = {SITE: ready.site, READY: True}
    if ready.records is not None:
        stated[RECORDS] = int(ready.records)
    if ready.answer_seconds is not None:
        stated[ANSWER_SECONDS] = float(ready.answer_seconds)
    stated.update({SETTING + key: value for key, value in ready.settings.items()})
    return RecordDict({READINESS: ConfigRecord(stated)})


def read_readiness_answer(content: RecordDict, node: str) -> SiteReady:
    """What the site that said yes in a readiness answer states; raises unless it is one
    (every value is the site's word: the server only uses it to configure its own side)."""
    answer = content.config_records.get(READINESS)
    if answer is None or answer.get(READY) is not True:
        raise FedPCAError(
            f"node {node} answered the readiness round with records {sorted(content)}, not "
            f"{READINESS!r}; is it running fedpca's ClientApp "
            "(fedpca.flower.site.clientapp.site_client_app)?"
        )
    records, seconds = answer.get(RECORDS), answer.get(ANSWER_SECONDS)
    return SiteReady(
        site=str(answer.get(SITE, node)),
        records=int(records) if isinstance(records, int) and records >= 0 else None,
        settings={key[len(SETTING):]: value for key, value in answer.items()
                  if key.startswith(SETTING)},
        answer_seconds=(float(seconds) if isinstance(seconds, (int, float)) and seconds > 0
                        else None),
    )


def is_legacy_request(content: RecordDict) -> bool:
    """Whether a train message is in the legacy format: a ``FitIns``."""
    # content.get, not content.config_records: that view is rebuilt on every access
    return isinstance(content.get(LEGACY_CONFIG), ConfigRecord)


def request_content(arrays: Sequence[np.ndarray], config: Mapping[str, Scalar]) -> RecordDict:
    """A Message-API request: ``arrays`` (in order) and ``config``."""
    return RecordDict({ARRAYS: ArrayRecord(list(arrays)), CONFIG: ConfigRecord(dict(config))})


def read_request(content: RecordDict) -> tuple[list[np.ndarray], dict[str, Scalar]]:
    """The arrays and config of a Message-API request (untrusted: refused unless the content
    is exactly the ArrayRecord ``"arrays"`` and the ConfigRecord ``"config"``)."""
    arrays, config = content.get(ARRAYS), content.get(CONFIG)
    if set(content) != {ARRAYS, CONFIG} or not isinstance(arrays, ArrayRecord) or (
        not isinstance(config, ConfigRecord)
    ):
        raise InvalidRequestError(
            f"refused: a request carries exactly an ArrayRecord {ARRAYS!r} and a ConfigRecord "
            f"{CONFIG!r}, got records {sorted(content)}"
        )
    return arrays.to_numpy_ndarrays(), dict(config)


def answer_content(answer: Answer) -> RecordDict:
    """A site's :class:`~fedpca.site.answer.Answer` as a Message-API answer: its arrays, its
    weight and public numbers as metrics, its name and guarantee as text."""
    described = {k: v for k, v in answer.metrics.items() if k == SITE or k.startswith(GUARANTEE)}
    metrics = {k: v for k, v in answer.metrics.items() if k not in described}
    return RecordDict({
        ARRAYS: ArrayRecord(answer.values),
        METRICS: MetricRecord({NUM_EXAMPLES: int(answer.weight), **metrics}),
        SITE: ConfigRecord({**described, SITE: answer.site}),
    })


def answer_from(
    site: str, n: int, arrays: Sequence[np.ndarray], metrics: Mapping[str, object]
) -> SiteAnswer:
    """One site's answer: exactly one array, its record count (``metrics[RECORDS]`` when the
    weight ``n`` is a secure sum's fixed one), its reported spending and guarantee."""
    if len(arrays) != 1:
        raise FedPCAError(
            f"site {site} returned {len(arrays)} arrays, expected 1; is it running fedpca's "
            "client for this algorithm?"
        )
    return SiteAnswer(
        site=site,
        n=int(metrics.get(RECORDS, n)),
        value=arrays[0],
        epsilon_spent=float(metrics.get("epsilon_spent", float("nan"))),
        releases=int(metrics.get("releases", 0)),
        guarantee=SiteGuarantee.from_metrics(metrics, site),
    )


def read_reply(content: RecordDict, node: str) -> SiteAnswer:
    """The :class:`SiteAnswer` in a Message-API answer (``node`` names a site that sent no
    name)."""
    # each record looked up by name: RecordDict's typed views (array_records, ...) copy
    # every record of the reply on each access
    arrays, metrics, names = content.get(ARRAYS), content.get(METRICS), content.get(SITE)
    if not isinstance(arrays, ArrayRecord) or not isinstance(metrics, MetricRecord):
        raise FedPCAError(
            f"node {node} answered with records {sorted(content)}, expected {ARRAYS!r} and "
            f"{METRICS!r}; is it running fedpca's ClientApp "
            "(fedpca.flower.site.clientapp.site_client_app)?"
        )
    if not isinstance(names, ConfigRecord):
        names = ConfigRecord()
    site = str(names.get(SITE, node))
    return answer_from(
        site, int(metrics.get(NUM_EXAMPLES, 0)), arrays.to_numpy_ndarrays(), {**metrics, **names},
    )


def read_fit_res(res: FitRes, node: str) -> SiteAnswer:
    """The :class:`SiteAnswer` in a legacy ``FitRes``."""
    site = str(res.metrics.get(SITE, node))
    return answer_from(site, res.num_examples, parameters_to_ndarrays(res.parameters), res.metrics)
