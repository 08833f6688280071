"""One Flower ClientApp for a fedpca site, answering both of Flower's strategy APIs.

Flower 1.41 cannot mix the two ways of writing a ClientApp: registering ``@app.train()`` on
a ``ClientApp(client_fn=...)`` raises "Use either `@app.train()` or `client_fn`, but not
both" (``flwr/clientapp/client_app.py``). :func:`site_client_app` therefore registers one
train handler that looks at each request's format
(:func:`~fedpca.clients.messages.is_legacy_request`):

* a legacy ``FitIns``, or a stage of Flower's SecAgg+ protocol, goes to
  ``ClientApp(client_fn=client_fn, mods=[secure_aggregation_mod])``: exactly the ClientApp
  fedpca ran before, so the legacy strategies and SecAgg+ see no change;
* a Message-API request is answered by :func:`answer_content`, which turns it into the same
  ``FitIns`` and calls the same ``Client.fit`` of the same
  :class:`~fedpca.clients.base.PrivateSiteClient`: the same request checks, refusals before
  any charge, ledger and metrics. It never passes through SecAgg+, so the site sees it as
  unmasked and a site whose policy relies on secure aggregation refuses it;
* a stage of fedpca's verifiable secure aggregation (:mod:`fedpca.clients.secure_protocol`)
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

import logging
from collections.abc import Callable

from flwr.app import Context, Error, Message, RecordDict
from flwr.client import Client
from flwr.clientapp import ClientApp
from flwr.common import FitIns, ndarrays_to_parameters
from flwr.common.constant import ErrorCode

from fedpca.clients.messages import is_legacy_request, read_request, reply_content
from fedpca.clients.secure_aggregation import is_secagg_plus_stage, secure_aggregation_mod
from fedpca.clients.secure_protocol import IdentityFn, answer_protocol, is_protocol_message
from fedpca.errors import FedPCAError, InvalidRequestError

logger = logging.getLogger(__name__)

#: What the coordinator reads when a site failed for a reason that is not one of fedpca's
#: refusals (the exception's own text stays in the site's log).
SITE_FAILURE = "the site could not answer; its operator has the details in its log"

#: ``context -> Client``: a site's client for the current message (e.g.
#: :func:`fedpca.clients.dps_pca.client_for_site` with the site's data and policy bound).
ClientFn = Callable[[Context], Client]


def answer_content(client_fn: ClientFn, content: RecordDict, context: Context) -> RecordDict:
    """The answer to a Message-API train request's ``content``, through the site's
    ``Client.fit``."""
    arrays, config = read_request(content)
    return reply_content(client_fn(context).fit(FitIns(ndarrays_to_parameters(arrays), config)))


def error_reply(message: Message, reason: str) -> Message:
    """The reply telling the server why this site released nothing."""
    return Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason),
                   reply_to=message)


def site_client_app(client_fn: ClientFn, identity_fn: IdentityFn | None = None) -> ClientApp:
    """A ClientApp answering fedpca's Message-API strategies (``DPSPCA``, ..., with or
    without verified secure aggregation) and its legacy strategies (``DPSPCAStrategy``, ...,
    with or without SecAgg+) from ``client_fn``.

    Args:
        client_fn: ``context -> Client`` building the site's client for each message, e.g.
            ``lambda context: client_for_site(context, X, policy, site="hospital-a")``.
        identity_fn: ``context -> SecureIdentity | None``, the site's identity in secure
            aggregation from its own policy (``None``: the site takes part in none).
    """
    legacy = ClientApp(client_fn=client_fn, mods=[secure_aggregation_mod])
    app = ClientApp()

    def answer(content: RecordDict, context: Context) -> RecordDict:
        return answer_content(client_fn, content, context)

    def identity(context: Context):
        return None if identity_fn is None else identity_fn(context)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        try:
            if is_protocol_message(message.content):
                return answer_protocol(message, context, identity, answer)
            if is_legacy_request(message.content):
                _refuse_secagg_plus(message, context, identity)
                return legacy(message, context)
            return Message(answer(message.content, context), reply_to=message)
        except FedPCAError as error:  # a refusal: its text quotes only public quantities
            logger.warning("%s", error)
            return error_reply(message, str(error))
        except Exception:  # not fedpca's words: they stay in the site's log
            logger.exception("answering a train request failed; the coordinator is told "
                             "only %r", SITE_FAILURE)
            return error_reply(message, SITE_FAILURE)

    return app


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
