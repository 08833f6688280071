"""The deployment commands: certificates, site keys, and a loopback demonstration.

* ``certs --out DIR [--host H ...] [--sites N]``: the CA, the SuperLink's certificate for
  the given hosts (and 127.0.0.1), and (for a demonstration) N site key pairs ``0 .. N-1``;
* ``site-key --out DIR --name NAME``: one site's key pair, made at the site;
* ``secagg-key --out DIR --name NAME --consortium C``: one site's secure-aggregation signing
  key, made at the site, its fingerprint (read to the members that vouch for it) and the
  roster entry it sends the consortium (signed: proof of possession);
* ``roster --out FILE --consortium NAME --member NAME=KEY:PROOF ... [--certificate
  NAME=FILE ...]``: the consortium's roster, which every member site holds;
* ``secagg-ca --out DIR --name NAME`` and ``secagg-cert --ca DIR --name NAME --key KEY
  --consortium C``: a consortium certificate authority (run by a party that is not the
  coordinator) and its certificate of one member's key in consortium ``C``, for sites that
  vouch by CA; ``secagg-revoke --ca DIR [--certificate FILE ...] --out CRL``: its
  revocation list of member certificates;
* ``app --out DIR``: the configuration-only Flower App that fedpca sites accept;
* ``local --workdir DIR --data A.npy B.npy ... [--policy A.toml B.toml] [--run-config
  'k=2 rounds=5']``: the whole deployment on 127.0.0.1 (TLS, SuperNode authentication, a
  policy file, ledger and pinned ClientApp per site), one run, then everything stops; a run
  that fails (e.g. a site cannot afford it) leaves its failure record and exits non-zero.

Run them as ``python -m fedpca.deployment COMMAND``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from flwr.common.config import parse_config_args

from fedpca.deployment.certs import (
    DEFAULT_VALID_DAYS,
    write_deployment_files,
    write_member_certificate,
    write_revocation_list,
    write_secagg_authority,
    write_site_key,
)
from fedpca.deployment.coordinator_runtime import run_coordinator_superexec
from fedpca.deployment.fab_check import write_config_only_app
from fedpca.deployment.launch import ConfigValue, LogEcho
from fedpca.deployment.local import DEFAULT_RUN_TIMEOUT, LocalDeployment, Site
from fedpca.errors import ConfigurationError
from fedpca.report import result_summary
from fedpca.secure.roster import RosterEntry, write_roster, write_signing_key


def register_deploy_command(commands: argparse._SubParsersAction) -> None:
    """Add ``deploy`` with ``certs``, ``site-key``, ``secagg-key``, ``roster``, ``app``,
    ``superexec`` and ``local`` to ``commands`` (an argparse subparsers)."""
    deploy = commands.add_parser(
        "deploy", help="certificates, site keys, the config-only App, a loopback deployment"
    )
    commands = deploy.add_subparsers(dest="deploy_command", required=True)
    certs = commands.add_parser("certs", help="CA, SuperLink certificate, site key pairs")
    certs.add_argument("--out", type=Path, required=True, help="folder to write to")
    certs.add_argument("--sites", type=int, default=0,
                       help="also make key pairs for sites 0..N-1 (demonstration only: a "
                            "real site makes its own with site-key)")
    certs.add_argument("--host", action="append", default=None,
                       help="an IP address or DNS name the sites dial (repeatable); "
                            "127.0.0.1 is always included")
    certs.add_argument("--days", type=int, default=DEFAULT_VALID_DAYS,
                       help="validity of the certificates")
    certs.set_defaults(func=_certs)

    _key_command(commands, "site-key", _site_key, "one site's authentication key pair",
                 "folder to write to", "the site's name (file name)")
    _key_command(commands, "secagg-key", _secagg_key,
                 "one site's secure-aggregation signing key (its roster entry)",
                 "the site's own folder to write the key to (0600)",
                 "the site's name in the roster").add_argument(
        "--consortium", required=True, help="the consortium's name")

    roster = commands.add_parser(
        "roster", help="write the consortium's roster of secure-aggregation keys")
    roster.add_argument("--out", type=Path, required=True, help="the roster file to write")
    roster.add_argument("--consortium", required=True, help="the consortium's name")
    roster.add_argument("--member", action="append", required=True, metavar="NAME=KEY:PROOF",
                        help="a member's entry as secagg-key printed it (repeat for every "
                             "member)")
    roster.add_argument("--certificate", action="append", default=[], metavar="NAME=FILE",
                        help="a member's certificate as secagg-cert wrote it (optional)")
    roster.set_defaults(func=_roster)

    _key_command(commands, "secagg-ca", _secagg_ca,
                 "a consortium CA that certifies members' secure-aggregation keys",
                 "the CA's own folder (its key stays there, 0600)", "the CA's name")

    certificate = commands.add_parser(
        "secagg-cert", help="the consortium CA's certificate of one member's key")
    certificate.add_argument("--ca", type=Path, required=True, help="the CA's folder")
    certificate.add_argument("--name", required=True, help="the member's name in the roster")
    certificate.add_argument("--key", required=True,
                             help="the member's public key (KEY of its roster entry), "
                                  "confirmed with the member out of band")
    certificate.add_argument("--consortium", required=True,
                             help="the consortium's name (the roster's): the certificate "
                                  "vouches for the member in this consortium only")
    certificate.add_argument("--out", type=Path, required=True, help="the PEM file to write")
    certificate.set_defaults(func=_secagg_cert)

    revoke = commands.add_parser(
        "secagg-revoke", help="the consortium CA's revocation list of member certificates")
    revoke.add_argument("--ca", type=Path, required=True, help="the CA's folder")
    revoke.add_argument("--certificate", type=Path, action="append", default=[],
                        help="a member certificate the CA withdraws (repeat; none: an empty "
                             "list, to publish a fresh one)")
    revoke.add_argument("--days", type=int, default=30,
                        help="days until the sites refuse the list as stale (default 30)")
    revoke.add_argument("--out", type=Path, required=True, help="the PEM file to write")
    revoke.set_defaults(func=_secagg_revoke)

    app = commands.add_parser(
        "app", help="write the configuration-only Flower App the sites accept (flwr run DIR)"
    )
    app.add_argument("--out", type=Path, required=True, help="an empty folder to write to")
    app.set_defaults(func=_app)

    superexec = commands.add_parser(
        "superexec", help="the coordinator's SuperExec for a SuperLink started with "
                          "--isolation process: ServerApps forked from a warm process")
    superexec.add_argument("--runtime-api-address", required=True, metavar="HOST:PORT",
                           help="the SuperLink's Runtime API (its --port in Flower 1.41+)")
    superexec.add_argument("--root-certificates", metavar="CA", help="the SuperLink's CA")
    superexec.add_argument("--parent-pid", type=int, help="stop when this process exits")
    superexec.set_defaults(func=_superexec)

    local = commands.add_parser("local", help="run the whole deployment on 127.0.0.1")
    local.add_argument("--workdir", type=Path, required=True,
                       help="folder for certificates, logs, FLWR_HOME and the result")
    local.add_argument("--data", type=Path, nargs="+", required=True,
                       help="one .npy, .csv or .parquet file per site (site i is named i)")
    local.add_argument("--policy", type=Path, nargs="+", default=None,
                       help="one site policy file per --data file (default: fedpca site "
                            "init's defaults, written into WORKDIR/sites/NAME/)")
    local.add_argument("--app-dir", type=Path, default=None,
                       help="the Flower App to send (default: a configuration-only App, the "
                            "only kind the sites accept)")
    local.add_argument("--run-config", action="append", default=None,
                       help="run_config overrides, as for flwr run: 'k=2 rounds=5'; repeat it "
                            "for several runs, one after the other on the same SuperLink and "
                            "sites")
    local.add_argument("--timeout", type=float, default=DEFAULT_RUN_TIMEOUT,
                       help="seconds the run may take")
    local.set_defaults(func=_local)


def _certs(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    files = write_deployment_files(
        args.out, [str(i) for i in range(args.sites)], args.host or (), args.days
    )
    server = files.server
    print(f"SuperLink: {server.ca_cert} {server.cert} {server.key}")
    for key in files.sites:
        print(f"site {key.name}: {key.private} (stays at the site) {key.public} (register)")
    print(f"done in {time.perf_counter() - start:.2f} s")
    return 0


def _site_key(args: argparse.Namespace) -> int:
    key = write_site_key(args.out, args.name)
    print(f"private key {key.private}: keep it at the site, mode 0600")
    print(f"public key {key.public}: send it to the coordinator to register")
    return 0


def _secagg_key(args: argparse.Namespace) -> int:
    path, entry = write_signing_key(args.out, args.name, args.consortium)
    print(f"private key {path}: keep it at the site (mode 0600); name it in the site's "
          "policy as [secure-aggregation] signing-key")
    print(f"fingerprint: {entry.fingerprint}  (read it to every member "
          "that vouches for this site, by phone or in person, never through the coordinator)")
    print(f"roster entry: --member {args.name}={entry.key}:{entry.proof}  (send it to the "
          "consortium, which writes the roster every member holds)")
    return 0


def _roster(args: argparse.Namespace) -> int:
    certificates = dict(_pairs(args.certificate, "--certificate", "NAME=FILE"))
    members = {}
    for name, value in _pairs(args.member, "--member", "NAME=KEY:PROOF"):
        key, separator, proof = value.partition(":")
        if not separator:
            raise ConfigurationError(f"--member {name}=...: give the member's entry as "
                                     "NAME=KEY:PROOF (the line fedpca deploy secagg-key printed)")
        certificate = certificates.pop(name, None)
        members[name] = RosterEntry(key, proof, None if certificate is None
                                    else Path(certificate).read_text(encoding="ascii"))
    if certificates:
        raise ConfigurationError(f"--certificate for {sorted(certificates)}, who have no "
                                 "--member entry; add their entries")
    path = write_roster(args.out, args.consortium, members)
    print(f"wrote {path} with {len(members)} members: give every member site the same file, "
          "outside the coordinator's channels, and name it in its policy as "
          "[secure-aggregation] roster")
    return 0


def _key_command(commands: argparse._SubParsersAction, name: str, func: Any, about: str,
                 out: str, named: str) -> argparse.ArgumentParser:
    """A command that writes a key into the folder ``--out`` under ``--name``."""
    command = commands.add_parser(name, help=about)
    command.add_argument("--out", type=Path, required=True, help=out)
    command.add_argument("--name", required=True, help=named)
    command.set_defaults(func=func)
    return command


def _pairs(values: list[str], flag: str, shape: str) -> list[tuple[str, str]]:
    """``NAME=VALUE`` arguments, each name once."""
    pairs = [value.partition("=") for value in values]
    names = [name for name, _, _ in pairs]
    if any(not separator for _, separator, _ in pairs) or len(set(names)) != len(names):
        raise ConfigurationError(f"{flag}: give each member once, as {shape}")
    return [(name, value) for name, _, value in pairs]


def _secagg_ca(args: argparse.Namespace) -> int:
    key, certificate = write_secagg_authority(args.out, args.name)
    print(f"CA key {key}: keep it with the CA (mode 0600)")
    print(f"CA certificate {certificate}: give it to the sites that vouch by this CA "
          "([secure-aggregation] vouched-ca), outside the coordinator's channels")
    return 0


def _secagg_cert(args: argparse.Namespace) -> int:
    path = write_member_certificate(args.ca, args.name, args.key, args.consortium, args.out)
    print(f"certificate {path}: the consortium lists it in {args.name}'s roster entry "
          f"(fedpca deploy roster --certificate {args.name}={path})")
    return 0


def _secagg_revoke(args: argparse.Namespace) -> int:
    path = write_revocation_list(args.ca, args.certificate, args.out, args.days)
    print(f"revocation list {path} ({len(args.certificate)} certificate(s), valid {args.days} "
          "days): give it to every site that vouches by this CA ([secure-aggregation] "
          "revocation-list), outside the coordinator's channels, before it expires")
    return 0


def _app(args: argparse.Namespace) -> int:
    folder = write_config_only_app(args.out)
    print(f"wrote {folder / 'pyproject.toml'}: run it with flwr run {folder} <federation>")
    return 0


def run_configs(texts: list[str] | None, workdir: Path) -> list[dict[str, ConfigValue]]:
    """One run_config per ``--run-config`` (one empty run without any), each with its
    ``output``: the one given, else ``WORKDIR/result.json`` (``result-N.json`` for run ``N``
    of several)."""
    configs = [parse_config_args([text]) if text else {} for text in texts or [""]]
    for number, config in enumerate(configs, start=1):
        name = "result.json" if len(configs) == 1 else f"result-{number}.json"
        config.setdefault("output", str(workdir / name))
    return configs


def _superexec(args: argparse.Namespace) -> int:
    run_coordinator_superexec(args.runtime_api_address, args.root_certificates,
                              args.parent_pid)
    return 0


def _local(args: argparse.Namespace) -> int:
    configs = run_configs(args.run_config, args.workdir)
    policies = args.policy or [None] * len(args.data)
    if len(policies) != len(args.data):
        raise ConfigurationError(
            f"--policy names {len(policies)} files for {len(args.data)} --data files; give one "
            "per site, in the same order, or none"
        )
    sites = [Site(str(i), path, policy)
             for i, (path, policy) in enumerate(zip(args.data, policies))]
    start = time.perf_counter()
    with LocalDeployment(args.workdir, sites, args.app_dir) as deployment:
        up = time.perf_counter()
        print(f"SuperLink {deployment.address} and {len(sites)} SuperNodes up in "
              f"{up - start:.1f} s; logs in {deployment.logs}", flush=True)
        for node_id, name in sorted(deployment.node_names().items()):
            print(f"node {node_id}: site {name}")
        for number, run_config in enumerate(configs, start=1):
            began = time.perf_counter()
            screen = LogEcho(sys.stdout)  # the coordinator's: flwr run's stream, live
            try:
                result = deployment.run(run_config, timeout=args.timeout, during=screen)
            finally:
                screen.flush()
            print(f"run {number} of {len(configs)} finished in "
                  f"{time.perf_counter() - began:.1f} s: {result_summary(result)}; result: "
                  f"{run_config['output']}", flush=True)
        for name, site in deployment.running.items():
            print(f"site {name}: policy {site.policy}; its ledger: fedpca site ledger "
                  f"--policy {site.policy}")
    print("every process stopped")
    return 0
