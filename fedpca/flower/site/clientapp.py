"""A fedpca site's Flower ClientApp: a thin shell over its
:class:`~fedpca.site.service.SiteService`.

Each message becomes one request of the site's service (:mod:`fedpca.site.service`, the whole
trust boundary) and the service's reply becomes the answer; nothing here decides anything a
site guarantees. Flower 1.41+ cannot mix ``@app.train()`` with a ``client_fn`` ("Use either
`@app.train()` or `client_fn`, but not both"), so one train handler reads each message's
format:

* a Message-API request (:func:`~fedpca.flower.wire.read_request`) is an
  :class:`~fedpca.site.service.Ask`, answered directly (no ``FitIns``/``NumPyClient``
  detour): never inside a secure sum, so a site whose policy relies on one refuses it;
* a stage of fedpca's verifiable secure aggregation is a
  :class:`~fedpca.site.service.Secure` (:mod:`fedpca.flower.secure_wire`);
* a legacy ``FitIns`` goes to Flower's own ``ClientApp(client_fn=...)`` over the same
  service as a :class:`~fedpca.flower.site.site_client.PrivateSiteClient` (the ``NumPyClient``
  adapter, one :class:`~fedpca.site.service.Ask` per ``fit``); any other train content,
  e.g. a stage of Flower's SecAgg+ (which fedpca does not use: it holds only against an
  honest-but-curious coordinator), is refused as a malformed request.

A QUERY message is the readiness question before round 1 (:mod:`fedpca.flower.server.readiness`),
the run's released result after the last round (:mod:`fedpca.flower.result_wire`), or the news
that the run failed (:mod:`fedpca.flower.run_end`). A refusal (or a malformed message) is
the reply's error, in the service's public words (:func:`fedpca.site.service.guarded`).

The services of the App and of fedpca's simulations are kept per node and run in each
process (:func:`cached_service`): a simulated site is opened once per run in each Ray worker,
not once per message; what it must remember between messages (its in-memory ledger, its
secure session) lives in the run's state (:mod:`fedpca.flower.site.run_state`), so a message that
lands in another process finds it.

Privacy guarantee: each site's transcript is (epsilon, delta)-DP per record under its own
policy, whatever the format (:mod:`fedpca.site.answer`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from flwr.app import Context, Error, Message, RecordDict
from flwr.client import Client
from flwr.clientapp import ClientApp
from flwr.common.constant import ErrorCode

from fedpca.algorithms.site import PrivateSite
from fedpca.flower.result_wire import is_result_message, read_result_message, result_answer
from fedpca.flower.run_end import is_run_end_message, read_run_end, run_end_answer
from fedpca.flower.site.run_state import ContextState, node_of
from fedpca.flower.secure_wire import is_protocol_message, protocol_content, protocol_request
from fedpca.flower.site.site_client import PrivateSiteClient
from fedpca.flower.wire import (
    answer_content,
    readiness_answer,
    is_legacy_request,
    read_readiness_question,
    read_request,
)
from fedpca.secure.identity import SecureIdentity
from fedpca.site.ready import SiteReady
from fedpca.site.service import (
    Ask,
    Node,
    Ready,
    Refusal,
    Request,
    ResultDelivery,
    RunEnd,
    SiteService,
    SiteSource,
    guarded,
)

logger = logging.getLogger(__name__)

#: ``context -> SiteService``: the service answering the message's node in its run.
ServiceFn = Callable[[Context], SiteService]
#: ``node -> SiteSource``: where a node's answers come from in its run.
SourceFn = Callable[[Node], SiteSource]
#: ``context -> Client``: a site's client for the current message (e.g.
#: :func:`~fedpca.flower.site.site_client.client_factory`'s, with its data and policy bound).
ClientFn = Callable[[Context], Client]
#: ``context -> SecureIdentity | None``: the site's identity in secure aggregation.
IdentityFn = Callable[[Context], SecureIdentity | None]
#: ``context -> SiteReady | str``: the site's answer to the readiness round (raises its
#: refusal).
ReadyFn = Callable[[Context], "SiteReady | str"]

#: Services kept per (run, node) in this process, with the node they were opened for.
SERVICES: dict[tuple[int, int], tuple[Node, SiteService]] = {}
#: The most services kept (the oldest go first).
MAX_SERVICES = 20_000


def cached_service(source_fn: SourceFn, context: Context) -> SiteService:
    """The service of the message's node in its run, opened once per process and kept while
    its node_config and run_config stay the same."""
    node, key = node_of(context), (context.run_id, context.node_id)
    cached = SERVICES.get(key)
    if cached is not None and cached[0] == node:
        return cached[1]
    service = SiteService(node, source_fn(node))
    if len(SERVICES) >= MAX_SERVICES:
        del SERVICES[next(iter(SERVICES))]
    SERVICES[key] = (node, service)
    return service


def service_client_app(service_for: ServiceFn) -> ClientApp:
    """The ClientApp answering every message through ``service_for(context)``'s site.

    It holds only module-level functions bound to ``service_for``, so it is cheap to pickle
    (Flower's Ray backend pickles the ClientApp with every message); the legacy path's
    ClientApp is built for the message that needs it (:func:`legacy_answer`)."""
    app = ClientApp()
    app.train()(functools.partial(answer_train, service_for))
    app.query()(functools.partial(answer_query, service_for))
    return app


def answer_train(service_for: ServiceFn, message: Message, context: Context) -> Message:
    """A train message's answer (module docstring)."""
    content = message.content
    if is_legacy_request(content):
        return legacy_answer(service_for, message, context)
    if is_protocol_message(content):
        return respond(service_for, message, context, lambda: protocol_request(content),
                       protocol_content)
    return respond(service_for, message, context, lambda: Ask(*read_request(content)),
                   answer_content)


def answer_query(service_for: ServiceFn, message: Message, context: Context) -> Message:
    """A query message's answer: the released result, the run's end, or readiness."""
    content = message.content
    if is_result_message(content):
        return respond(service_for, message, context,
                       lambda: ResultDelivery(functools.partial(read_result_message, content)),
                       lambda received: result_answer(received.site))
    if is_run_end_message(content):
        return respond(service_for, message, context, lambda: RunEnd(read_run_end(content)),
                       lambda received: run_end_answer(received.site))

    def ready() -> Ready:
        read_readiness_question(content)
        return Ready()

    return respond(service_for, message, context, ready, readiness_answer)


def respond(service_for: ServiceFn, message: Message, context: Context,
            read: Callable[[], Request], encode: Callable[[Any], RecordDict]) -> Message:
    """The answer to ``message``: its request (``read``, UNTRUSTED: a malformed one is
    refused) handled by the node's service (:meth:`~fedpca.site.service.SiteService.handle`),
    the reply encoded by ``encode``; a refusal is the reply's error."""
    what = str(message.metadata.message_type)
    request = guarded(what, read)
    outcome = (request if isinstance(request, Refusal)
               else service_for(context).handle(request, ContextState(context)))
    if isinstance(outcome, Refusal):
        return error_reply(message, outcome.reason)
    return Message(encode(outcome), reply_to=message)


def legacy_answer(service_for: ServiceFn, message: Message, context: Context) -> Message:
    """A legacy ``FitIns``, through Flower's own ClientApp over the node's service as a
    ``NumPyClient`` (:class:`~fedpca.flower.site.site_client.PrivateSiteClient`)."""
    app = ClientApp(client_fn=functools.partial(legacy_client, service_for))
    outcome = guarded(str(message.metadata.message_type), lambda: app(message, context))
    if isinstance(outcome, Refusal):
        return error_reply(message, outcome.reason)
    return outcome


def legacy_client(service_for: ServiceFn, context: Context) -> Client:
    """The node's service as a Flower ``Client`` (the legacy API)."""
    return PrivateSiteClient(service_for(context), ContextState(context)).to_client()


def error_reply(message: Message, reason: str) -> Message:
    """The reply telling the server why this site released nothing."""
    return Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason),
                   reply_to=message)


class FunctionSource(SiteSource):
    """A site given as functions of the message's context (:func:`site_client_app`): its
    client (built for every message), its secure identity and its readiness answer."""

    def __init__(self, context: Context, client_fn: ClientFn,
                 identity_fn: IdentityFn | None, ready_fn: ReadyFn | None) -> None:
        self.context, self.client_fn = context, client_fn
        self.identity_fn, self.ready_fn = identity_fn, ready_fn

    def open(self) -> PrivateSite:
        """The site behind ``client_fn``'s client (a NumPyClient's ``Client`` wrapper)."""
        client = self.client_fn(self.context)
        return getattr(client, "numpy_client", client).site

    def ready(self) -> SiteReady | None:
        """``ready_fn``'s answer, or the opened site's."""
        if self.ready_fn is None:
            return None
        ready = self.ready_fn(self.context)
        return SiteReady(ready) if isinstance(ready, str) else ready

    def identity(self) -> SecureIdentity | None:
        """``identity_fn``'s identity, or none."""
        return None if self.identity_fn is None else self.identity_fn(self.context)


def function_service(client_fn: ClientFn, identity_fn: IdentityFn | None,
                     ready_fn: ReadyFn | None, context: Context) -> SiteService:
    """A service over :class:`FunctionSource` for this message."""
    return SiteService(node_of(context), FunctionSource(context, client_fn, identity_fn,
                                                        ready_fn))


def site_client_app(client_fn: ClientFn, identity_fn: IdentityFn | None = None,
                    ready_fn: ReadyFn | None = None) -> ClientApp:
    """A site's ClientApp answering fedpca's Message-API strategies (``DPSPCA``, ..., with or
    without verified secure aggregation), their legacy-API adapters (``DPSPCAStrategy``, ...)
    and their readiness round, from ``client_fn``.

    Args:
        client_fn: ``context -> Client`` building the site's client for each message, e.g.
            ``lambda context: client_for_site(context, X, policy, site="hospital-a")``.
        identity_fn: ``context -> SecureIdentity | None``, the site's identity in secure
            aggregation from its own policy (``None``: the site takes part in none).
        ready_fn: ``context -> SiteReady | str``, the site's answer to the readiness round
            from its policy and ledger alone (raises its refusal when it is not ready for
            the run); default: the client's site's (its ledger against what is left of the run).
    """
    return service_client_app(functools.partial(function_service, client_fn, identity_fn,
                                                ready_fn))
