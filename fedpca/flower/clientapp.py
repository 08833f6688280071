"""One Flower ClientApp for a fedpca site, answering both of Flower's strategy APIs.

Flower 1.41 cannot mix the two ways of writing a ClientApp: registering ``@app.train()`` on
a ``ClientApp(client_fn=...)`` raises "Use either `@app.train()` or `client_fn`, but not
both" (``flwr/clientapp/client_app.py``). :func:`site_client_app` therefore registers one
train handler that looks at each request's format
(:func:`~fedpca.flower.wire.is_legacy_request`), and one query handler:

* a legacy ``FitIns``, or a stage of Flower's SecAgg+ protocol, goes to
  ``ClientApp(client_fn=client_fn, mods=[secure_aggregation_mod])``: exactly the ClientApp
  fedpca ran before, so the legacy strategies and SecAgg+ see no change;
* a Message-API request is answered by :func:`answer_content`, which turns it into the same
  ``FitIns`` and calls the same ``Client.fit`` of the same
  :class:`~fedpca.flower.site_client.PrivateSiteClient`: the same request checks, refusals before
  any charge, ledger and metrics. It never passes through SecAgg+, so the site sees it as
  unmasked and a site whose policy relies on secure aggregation refuses it;
* the budget round's question (a QUERY message, before round 1) is answered by the site's
  ``budget_fn``, from its policy and ledger alone: its name when it can afford the whole run
  as it calibrates it, else its refusal (:mod:`fedpca.flower.readiness`);
* the run's released result (a QUERY message, after the last round:
  :mod:`fedpca.flower.delivery`) goes to the site's ``result_fn``, which checks
  it as hostile input and, at a real site, stores it beside its policy
  (:mod:`fedpca.site.results`); the answer is the site's name, and no budget is spent;
* the news that the run failed (a QUERY message, :mod:`fedpca.flower.run_end`) goes to the
  site's ``end_fn``: a real site's ledger then says so; no budget is spent or given back;
* a stage of fedpca's verifiable secure aggregation (:mod:`fedpca.flower.secure_site`)
  goes to the site's session; its input stage answers through :func:`answer_content` inside
  the protocol's masking. A site whose identity is ``verified_only`` (a real site) refuses
  Flower's SecAgg+, which holds only against an honest-but-curious coordinator.

Privacy guarantee: unchanged by the format; each site's transcript is (epsilon, delta)-DP per
record under its own policy (see the algorithm's client module). Only fedpca's own words
leave the site: a refusal (a :class:`~fedpca.errors.FedPCAError`, whose text quotes only
public quantities) becomes the reply's error with its text, which the strategies read from
``msg.error.reason``; any other exception (``MemoryError``, ``EOFError``, a library's
``ValueError: mmap length is greater than file size``, ...), whose text nobody vetted and may
describe the site's files or data, becomes the fixed :data:`SITE_FAILURE`, and its traceback
goes to the site's own log only.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from flwr.app import Context, Error, Message, RecordDict
from flwr.client import Client
from flwr.clientapp import ClientApp
from flwr.common import FitIns, GetPropertiesIns, ndarrays_to_parameters
from flwr.common.constant import ErrorCode

from fedpca.flower.wire import (
    SITE,
    budget_answer,
    is_legacy_request,
    read_budget_question,
    read_request,
    reply_content,
)
from fedpca.flower.result_wire import (
    is_result_message,
    read_result_message,
    result_answer,
)
from fedpca.flower.run_end import is_run_end_message, read_run_end, run_end_answer
from fedpca.flower.secagg_plus import is_secagg_plus_stage, secure_aggregation_mod
from fedpca.flower.secure_site import IdentityFn, answer_protocol, is_protocol_message
from fedpca.errors import FedPCAError, InvalidRequestError
from fedpca.site.ready import SiteReady

logger = logging.getLogger(__name__)

#: What the coordinator reads when a site failed for a reason that is not one of fedpca's
#: refusals (the exception's own text stays in the site's log).
SITE_FAILURE = "the site could not answer; its operator has the details in its log"

#: ``context -> Client``: a site's client for the current message (e.g.
#: :func:`~fedpca.flower.site_client.client_factory` of the algorithm's site with the site's data and policy bound).
ClientFn = Callable[[Context], Client]
#: ``context -> SiteReady``: the site's answer to the budget (readiness) round when it is
#: ready for the whole run (:class:`~fedpca.site.ready.SiteReady`, or just its name); raises a
#: :class:`~fedpca.errors.FedPCAError` saying why it is not.
BudgetFn = Callable[[Context], "SiteReady | str"]
#: ``(context, reason) -> site name``: the site takes the coordinator's word (UNTRUSTED) that
#: the run failed for ``reason`` (:mod:`fedpca.flower.run_end`).
EndFn = Callable[[Context, str], str]
#: ``(context, content) -> site name``: the site takes the run's released result from a
#: result message's untrusted ``content`` (:mod:`fedpca.flower.result_wire`), or raises
#: a :class:`~fedpca.errors.FedPCAError` saying why it refuses it.
ResultFn = Callable[[Context, RecordDict], str]


def client_budget(client_fn: ClientFn, context: Context) -> SiteReady:
    """The budget round's answer of the site ``client_fn`` builds: its ``get_properties``
    (:meth:`~fedpca.flower.site_client.PrivateSiteClient.get_properties`: from the site's policy
    and the run's ledger); it states nothing beyond its name (it runs with the run_config's
    settings)."""
    properties = client_fn(context).get_properties(GetPropertiesIns(config={})).properties
    return SiteReady(str(properties[SITE]))


def client_run_end(client_fn: ClientFn, context: Context, reason: str) -> str:
    """A simulated site's taking of the news that its run failed (:mod:`fedpca.flower.run_end`):
    logged; its in-memory ledger ends with the run."""
    client = client_fn(context)
    site = getattr(client, "numpy_client", client).site
    logger.warning("%s: the coordinator says run %s failed: %s", site.site, context.run_id,
                   reason)
    return site.site


def client_result(client_fn: ClientFn, context: Context, content: RecordDict) -> str:
    """A simulated site's taking of the released result: checked against its client's width
    and limits (:func:`~fedpca.flower.result_wire.read_result_message`) and logged, not
    stored (a real site stores it: :func:`fedpca.flower.real_site.receive_real_site_result`).
    Costs no budget."""
    client = client_fn(context)
    site = getattr(client, "numpy_client", client).site  # a NumPyClient's Client wrapper
    result = read_result_message(content, site.dim, site.limits)
    logger.info("%s: received the released result of run %s (%s, k=%d)", site.site,
                result.run_id, result.algorithm, result.k)
    return site.site


def answer_content(client_fn: ClientFn, content: RecordDict, context: Context) -> RecordDict:
    """The answer to a Message-API train request's ``content``, through the site's
    ``Client.fit``."""
    arrays, config = read_request(content)
    return reply_content(client_fn(context).fit(FitIns(ndarrays_to_parameters(arrays), config)))


def error_reply(message: Message, reason: str) -> Message:
    """The reply telling the server why this site released nothing."""
    return Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason),
                   reply_to=message)


def site_client_app(client_fn: ClientFn, identity_fn: IdentityFn | None = None,
                    budget_fn: BudgetFn | None = None,
                    result_fn: ResultFn | None = None,
                    end_fn: EndFn | None = None) -> ClientApp:
    """A ClientApp answering fedpca's Message-API strategies (``DPSPCA``, ..., with or
    without verified secure aggregation) and its legacy strategies (``DPSPCAStrategy``, ...,
    with or without SecAgg+) from ``client_fn``, and their budget round (a query).

    Args:
        client_fn: ``context -> Client`` building the site's client for each message, e.g.
            ``lambda context: client_for_site(context, X, policy, site="hospital-a")``.
        identity_fn: ``context -> SecureIdentity | None``, the site's identity in secure
            aggregation from its own policy (``None``: the site takes part in none).
        budget_fn: ``context -> site name``, the site's answer to the budget round, from its
            policy and ledger alone (raises the site's refusal when it cannot afford the
            run); default: :func:`client_budget` of ``client_fn``.
        result_fn: ``(context, content) -> site name``, the site's taking of the run's
            released result (the run's last message; costs no budget, the answer is the
            site's name only); default: :func:`client_result` of ``client_fn``.
        end_fn: ``(context, reason) -> site name``, the site's taking of the news that its
            run failed (costs no budget); default: :func:`client_run_end` of ``client_fn``.
    """
    legacy = ClientApp(client_fn=client_fn, mods=[secure_aggregation_mod])
    app = ClientApp()
    budget = budget_fn or functools.partial(client_budget, client_fn)
    take_result = result_fn or functools.partial(client_result, client_fn)
    take_end = end_fn or functools.partial(client_run_end, client_fn)

    def answer(content: RecordDict, context: Context) -> RecordDict:
        return answer_content(client_fn, content, context)

    def identity(context: Context):
        return None if identity_fn is None else identity_fn(context)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        def reply() -> Message:
            if is_protocol_message(message.content):
                return answer_protocol(message, context, identity, answer)
            if is_legacy_request(message.content):
                _refuse_secagg_plus(message, context, identity)
                return legacy(message, context)
            return Message(answer(message.content, context), reply_to=message)

        return guarded(message, reply)

    @app.query()
    def query(message: Message, context: Context) -> Message:
        def reply() -> Message:
            if is_result_message(message.content):
                return Message(result_answer(take_result(context, message.content)),
                               reply_to=message)
            if is_run_end_message(message.content):
                return Message(run_end_answer(take_end(context, read_run_end(message.content))),
                               reply_to=message)
            read_budget_question(message.content)
            ready = budget(context)
            ready = SiteReady(ready) if isinstance(ready, str) else ready
            return Message(budget_answer(ready), reply_to=message)

        return guarded(message, reply)

    return app


def guarded(message: Message, reply: Callable[[], Message]) -> Message:
    """``reply()``, or the error reply saying why the site released nothing: a refusal's
    own text (a :class:`~fedpca.errors.FedPCAError` quotes only public quantities), any
    other exception's as :data:`SITE_FAILURE` (its traceback in the site's log only)."""
    try:
        return reply()
    except FedPCAError as error:  # a refusal: its text quotes only public quantities
        logger.warning("%s", error)
        return error_reply(message, str(error))
    except Exception:  # not fedpca's words: they stay in the site's log
        logger.exception("answering a %s message failed; the coordinator is told only %r",
                         message.metadata.message_type, SITE_FAILURE)
        return error_reply(message, SITE_FAILURE)


def _refuse_secagg_plus(message: Message, context: Context, identity: IdentityFn) -> None:
    """Refuse Flower's SecAgg+ at a site that joins only the verifiable protocol."""
    if not is_secagg_plus_stage(message.content):
        return
    own = identity(context)
    if own is not None and own.verified_only:
        raise InvalidRequestError(
            f"{own.member}: refused: this site answers secure sums only through fedpca's "
            "verifiable secure aggregation, not Flower's SecAgg+ (which trusts the "
            "coordinator to follow the protocol); nothing was released"
        )
