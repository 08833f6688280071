"""A hostile coordinator for ``tests/test_secure_deployment.py``: a ServerApp that a
configuration-only FAB may name (its ``serverapp`` component), run by the SuperLink's ServerApp
process (the test puts this folder on the ``PYTHONPATH`` of the coordinator's processes only:
the SuperLink and the ``flwr`` CLI; the sites never import it).

It attacks the three real sites of the test's consortium with messages of fedpca's verified
secure aggregation (:mod:`fedpca.secure`, forged advertisements made with
:class:`~fedpca.secure.site_session.SiteSession` objects holding the coordinator's own keys), sent
as TRAIN messages carrying the ConfigRecord ``fedpca.secagg``, and records every site's reply
(its message kind, or its refusal ``msg.error.reason``) in a JSON report next to the
run_config ``output`` file (:func:`report_path`). It then raises with the sites' reasons, so
that ``flwr run``'s output (the ServerApp's log) shows them too.

* :data:`hostile_app` (the first site is ``a``, then ``b``, ``c`` in name order): threshold 1
  and a key list of ``a`` alone (attack 1), sent to ``a``; neighbours' keys the coordinator
  made itself under roster names (attack 2) and a key list of every real advertisement with
  another member's signature altered, sent to ``b``; Sybils outside the roster (attack 3),
  sent to ``c``. Each must be refused before the site sends anything (no share bundle, no
  masked input). Then an honest key agreement and input round (the sites charge and mask
  their answers), two different survivor sets shown to different sites, and unmask requests
  for the smaller set with relayed MACs: no site may reveal.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from flwr.app import ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.serverapp import Grid, ServerApp

from fedpca.algorithms.secure_sum import SumDescription
from fedpca.flower.server.app_server import server_scenario
from fedpca.flower.wire import request_content
from fedpca.flower.secure_wire import PROTOCOL_RECORD
from fedpca.dp.hadamard import next_power_of_two
from fedpca.scenarios.dpdis_pca import DPdisPCAScenario
from fedpca.secure.messages import (
    Advertisement,
    ConsistencyRequest,
    Endorsement,
    KeyList,
    SetupRequest,
    ShareBundle,
    UnmaskRequest,
)
from fedpca.secure.roster import Roster, roster_entry
from fedpca.secure.server_session import ServerSession
from fedpca.secure.site_session import SiteSession
from fedpca.flower.server.strategies import DPdisPCA

#: The consortium of the test's roster (public: the coordinator knows it too).
CONSORTIUM = "fedpca-test-consortium"
#: Sites the hostile apps wait for.
SITES = 3
#: Seconds one exchange waits for the sites' replies.
TIMEOUT = 120.0
#: Seconds between two looks for the sites' replies.
POLL = 0.25
#: The threshold of the attacks' "proper" setups (smallest valid for N = 3, c = 0, M = 2).
THRESHOLD = 2


def report_path(output: str | Path) -> Path:
    """Where a hostile app writes its report, next to the run's ``output`` file."""
    output = Path(output)
    return output.with_name(output.stem + "-hostile.json")


class Recorder:
    """Sends protocol messages and records every reply: ``steps[name][node] =
    {"kind": ...}`` for a protocol reply, ``{"error": reason}`` for a refusal.

    It pushes a whole batch of steps at once and polls every 0.25 s (Flower's
    ``grid.send_and_receive`` polls every 3 s, and a SuperNode idles 3 s between pulls when it
    has nothing to do): a site with several queued messages answers them back to back.
    """

    def __init__(self, grid: Grid, context: Context) -> None:
        self.grid, self.run_id = grid, str(context.run_id)
        self.output = str(context.run_config.get("output", ""))
        self.steps: dict[str, dict[str, dict[str, Any]]] = {}
        self.members: dict[int, str] = {}
        self.times: dict[str, float] = {}

    def exchange(self, batch: Mapping[str, Mapping[int, RecordDict]]
                 ) -> dict[str, dict[int, dict[str, Any]]]:
        """Send every step's content to each of its nodes at once; each step's protocol
        replies by node (refusals recorded)."""
        sent = [(step, node, Message(content=content, dst_node_id=node,
                                     message_type=MessageType.TRAIN))
                for step, contents in batch.items() for node, content in contents.items()]
        ids = list(self.grid.push_messages([message for _, _, message in sent]))
        pending = {mid: (step, node) for mid, (step, node, _) in zip(ids, sent)}
        answered: dict[str, dict[int, dict[str, Any]]] = {step: {} for step in batch}
        for step in batch:
            self.steps[step] = {}
        deadline = time.monotonic() + TIMEOUT
        while pending and time.monotonic() < deadline:
            for reply in self.grid.pull_messages(list(pending)):
                step, node = pending.pop(reply.metadata.reply_to_message_id)
                if reply.has_error():
                    self.steps[step][str(node)] = {
                        "error": reply.error.reason or f"code {reply.error.code}"}
                else:
                    data = dict(reply.content.config_records.get(PROTOCOL_RECORD, {}))
                    self.steps[step][str(node)] = {
                        "kind": str(data.get("kind", "no protocol reply"))}
                    answered[step][node] = data
            time.sleep(POLL)
        for step, node in pending.values():
            self.steps[step][str(node)] = {"error": "no reply in time"}
        self.save()
        return answered

    def send(self, batch: Mapping[str, Mapping[int, Any]]) -> dict[str, dict[int, dict]]:
        """:meth:`exchange` of one protocol message per step and node."""
        return self.exchange({step: {node: protocol(m) for node, m in messages.items()}
                              for step, messages in batch.items()})

    def save(self) -> None:
        if self.output:
            report = {"run_id": self.run_id, "times": self.times,
                      "members": {str(n): m for n, m in self.members.items()},
                      "steps": self.steps}
            report_path(self.output).write_text(json.dumps(report, indent=1))

    def fail(self) -> None:
        """Raise with every refusal, so that ``flwr run``'s output shows them."""
        reasons = [f"{step}: {reply['error']}" for step, replies in self.steps.items()
                   for reply in replies.values() if "error" in reply]
        raise RuntimeError("hostile coordinator: the sites refused:\n" + "\n".join(reasons))


def protocol(message: Any) -> RecordDict:
    """A TRAIN message's content carrying one protocol message."""
    return RecordDict({PROTOCOL_RECORD: ConfigRecord(message.to_dict())})


def wait_for_sites(grid: Grid) -> list[int]:
    deadline = time.monotonic() + TIMEOUT
    while len(nodes := sorted(grid.get_node_ids())) < SITES:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(nodes)} sites connected")
        time.sleep(0.25)
    return nodes


def forged(names: list[str], request: SetupRequest, prefix: str = "") -> list[Advertisement]:
    """Advertisements for ``names`` signed with key pairs the coordinator made itself (a
    roster of its own, under the real consortium's name)."""
    keys = {name: Ed25519PrivateKey.generate() for name in names}
    roster = Roster.from_members(CONSORTIUM, {n: roster_entry(CONSORTIUM, n, k)
                                              for n, k in keys.items()})
    return [SiteSession(n, keys[n], roster, min_sites=THRESHOLD, colluders=0, max_rounds=1,
                        vouched=roster.names).advertise(request) for n in names]


def dpdis_strategy(grid: Grid, context: Context) -> DPdisPCA:
    """The run's DPdisPCA strategy, as the App's ServerApp builds it."""
    scenario, config, _ = server_scenario(DPdisPCAScenario, grid, context)
    secure = scenario.secure_sum(scenario.max_records(config))
    return DPdisPCA(dim=scenario.dim, k=scenario.k, r=scenario.r, weighting=scenario.weighting,
                    variant=scenario.variant, min_sites=scenario.required_sites(),
                    secure=secure)


hostile_app = ServerApp()


@hostile_app.main()
def hostile(grid: Grid, context: Context) -> None:
    """Attacks 1-3 and an altered signature (each must be refused before the site sends
    anything), then an honest key agreement and input round followed by a split view of the
    survivor sets (no site may reveal)."""
    nodes = wait_for_sites(grid)
    rec = Recorder(grid, context)
    strategy = dpdis_strategy(grid, context)
    arrays, config = strategy.request(1)
    modulus = int(config["sum_modulus"])
    # the run's honest description of its one sum (the attacks below are about the keys)
    description = SumDescription(THRESHOLD, 0, (strategy.server.round_sum(1),)).to_text()
    server = ServerSession(rec.run_id, 1, THRESHOLD, modulus, description)
    request = server.setup_request()
    # a proper setup: every site advertises a signed key (it sends nothing else yet)
    replies = rec.send({"setup": dict.fromkeys(nodes, request)})
    ads = {node: Advertisement.from_dict(data) for node, data in replies["setup"].items()}
    rec.members = {node: ad.member for node, ad in ads.items()}
    if len(ads) != len(nodes):
        rec.fail()
    by_name = {ad.member: ad for ad in ads.values()}
    node_of = {ad.member: node for node, ad in ads.items()}
    a, b, c = sorted(by_name)
    victim = by_name[c]
    signature = victim.signature[:-1] + bytes([victim.signature[-1] ^ 1])
    altered = [Advertisement(c, victim.run_id, victim.public_key, signature)
               if ad is victim else ad for ad in by_name.values()]
    # The attacks, spread over the sites (a site answers one message at a time, and each
    # costs it a ClientApp process). A refusal leaves a site's session as it was, so the
    # order of a site's messages does not matter.
    rec.send({
        # Attack 1: threshold 1 (a share would be the seed itself), and the site alone
        "threshold-1": {node_of[a]: SetupRequest(rec.run_id, 1, 1, modulus, description)},
        "alone": {node_of[a]: KeyList(rec.run_id, (by_name[a],))},
        # Attack 2: M distinct members by their roster names, keys the coordinator made
        "fake-neighbours": {node_of[b]: KeyList(rec.run_id, (by_name[b], *forged(
            [a, c], request)))},
        # every real advertisement, another member's signature altered
        "bad-signature": {node_of[b]: KeyList(rec.run_id, tuple(altered))},
        # Attack 3: Sybils, members the roster does not hold
        "sybils": {node_of[c]: KeyList(rec.run_id, (by_name[c], *forged(
            [f"sybil-{i}" for i in range(3)], request)))},
    })
    split_view(rec, server, ads, arrays, config)


def split_view(rec: Recorder, server: ServerSession, ads: Mapping[int, Advertisement],
               arrays: list, config: dict) -> None:
    """The honest key list and input round (the sites charge and mask their answers), then
    the first and last sites are shown every survivor, the middle one the set without the
    last; every site is then asked to unmask that smaller set, with the MACs relayed."""
    for ad in ads.values():
        server.receive_advertisement(ad)
    key_list = server.key_list()
    bundles = rec.send({"key-list": dict.fromkeys(ads, key_list)})["key-list"]
    for data in bundles.values():
        server.receive_bundle(ShareBundle.from_dict(data))
    length = next_power_of_two(int(config["sum_dimension"]))
    requests = server.input_requests(1, length)
    contents = {}
    for node, member in rec.members.items():
        contents[node] = request_content(arrays, config)
        contents[node][PROTOCOL_RECORD] = ConfigRecord(requests[member].to_dict())
    rec.times["input_sent"] = time.time()
    rec.exchange({"masked-inputs": contents})
    node_of = {member: node for node, member in rec.members.items()}
    first, middle, last = sorted(node_of)
    everyone, smaller = (first, middle, last), (first, middle)
    shown = {first: everyone, middle: smaller, last: everyone}
    answered = rec.send({"split-consistency": {
        node_of[m]: ConsistencyRequest(rec.run_id, 1, survivors)
        for m, survivors in shown.items()}})["split-consistency"]
    endorsements = {rec.members[node]: Endorsement.from_dict(data)
                    for node, data in answered.items()}
    unmask = {}
    for m in everyone:
        macs = {peer: e.macs[m] for peer, e in endorsements.items()
                if peer != m and peer in smaller and m in e.macs}
        unmask[node_of[m]] = UnmaskRequest(rec.run_id, 1, smaller, macs)
    rec.send({"split-unmask": unmask})
    rec.fail()
