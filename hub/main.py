"""`multiq-hub`: run the hub service, or hash a token for its users file.

    multiq-hub --port 8470 --store sqlite:/var/lib/multiq/hub.db \\
               --users-file users.yaml --secrets-dir /etc/multiq/secrets \\
               --tls-cert hub.crt --tls-key hub.key

    echo -n "$TOKEN" | multiq-hub hash-token     # → scrypt$…, the users file's tokenHash

With --tls-cert/--tls-key the hub serves HTTPS, and the agents' WebSockets (wss) on the same
port; without, plain HTTP (what `qctl dev up` runs, on 127.0.0.1).

Several hubs on one etcd cluster, one of which leads at a time (hub.election):

    multiq-hub --store etcd://h1:2379,h2:2379,h3:2379 \\
               --host 0.0.0.0 --advertise-url http://hub-0.hubs:8470 --election-ttl 5 …

Every flag has a MULTIQ_HUB_<FLAG> environment variable (e.g. MULTIQ_HUB_STORE) for
containers. Traces are exported as the standard OTEL_* variables say (telemetry.tracing: none
by default); `--log-format json` writes log lines as JSON with their trace ids.

Called by: the console script, `qctl dev up`, e2e tests.
"""

from __future__ import annotations

import argparse
import os
import ssl
import sys
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web
from pydantic import ValidationError

from api.meta import build_schemas
from api.tokens import hash_token
from hub.app import VERSION, build_app
from hub.auth import load_users_file
from hub.errors import SettingsError
from hub.settings import HubSettings
from runtime.collector import tune_collector
from runtime.loop import EVENT_LOOPS, new_event_loop
from telemetry.logs import LOG_FORMATS, configure_logging
from telemetry.tracing import TracingConfigError, configure_tracing

__all__ = ["main", "parse_settings"]


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"MULTIQ_HUB_{name.upper().replace('-', '_')}", default)


def parse_settings(argv: Sequence[str] | None = None) -> HubSettings:
    defaults = HubSettings()
    parser = argparse.ArgumentParser(prog="multiq-hub", description="Run the MultiQ hub.")
    parser.add_argument("--version", action="version", version=f"multiq-hub {VERSION}")
    parser.add_argument("--host", default=_env("host", defaults.host))
    parser.add_argument("--port", type=int, default=int(_env("port", str(defaults.port)) or 0))
    parser.add_argument(
        "--store",
        default=_env("store", defaults.store),
        help="sqlite:PATH (default), or etcd://HOST:PORT[,HOST:PORT…] for several hubs",
    )
    parser.add_argument(
        "--advertise-url",
        default=_env("advertise-url"),
        help="where agents and the other hubs reach this hub (default: http://HOST:PORT)",
    )
    parser.add_argument(
        "--election-ttl",
        type=int,
        default=int(_env("election-ttl", str(defaults.election_ttl_seconds)) or 5),
        help="seconds after which another hub leads when the leader is gone (etcd only)",
    )
    parser.add_argument(
        "--users-file",
        default=_env("users-file"),
        help="YAML: users with name, groups and tokenHash (from `multiq-hub hash-token`)",
    )
    parser.add_argument("--tls-cert", default=_env("tls-cert"), help="PEM certificate (chain)")
    parser.add_argument("--tls-key", default=_env("tls-key"), help="PEM private key")
    parser.add_argument(
        "--certificate-authority",
        default=_env("certificate-authority"),
        help="PEM CA bundle to trust when forwarding to the leading hub over https",
    )
    parser.add_argument(
        "--secrets-dir",
        default=_env("secrets-dir"),
        help="where MemberCluster tokenRef secrets are mounted",
    )
    parser.add_argument(
        "--offer-timeout",
        type=float,
        default=float(_env("offer-timeout", str(defaults.offer_timeout_seconds)) or 30),
    )
    parser.add_argument(
        "--fair-share-half-life",
        type=float,
        default=float(
            _env("fair-share-half-life", str(defaults.fair_share_half_life_seconds)) or 0
        ),
        help="seconds in which fleet usage halves (0: never; default 7 days)",
    )
    parser.add_argument(
        "--fair-share-calc-period",
        type=float,
        default=float(
            _env("fair-share-calc-period", str(defaults.fair_share_calc_period_seconds)) or 60
        ),
        help="seconds between fair-share usage updates",
    )
    parser.add_argument(
        "--fair-share-weight",
        action="append",
        default=None,
        metavar="RESOURCE=WEIGHT",
        help="billing weight of a resource per unit per second (repeat; default cpu=1)",
    )
    parser.add_argument(
        "--log-dir",
        default=_env("log-dir"),
        help="where workloads' logs are kept (default: STORE_PATH.logs beside a SQLite store, "
        "./multiq-hub-logs with etcd)",
    )
    parser.add_argument(
        "--log-retention",
        type=float,
        default=float(_env("log-retention", str(defaults.log_retention_seconds)) or 0),
        help="seconds a workload generation's logs are kept after their last line (7 days)",
    )
    parser.add_argument(
        "--log-retention-bytes",
        type=int,
        default=int(_env("log-retention-bytes", str(defaults.log_retention_bytes)) or 0),
        help="the log store's size limit; the oldest generations go first (10 GiB)",
    )
    parser.add_argument("--log-level", default=_env("log-level", "INFO"))
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=_env("log-format", "text"),
        help="text for people (default), json for collectors: one object a line, with the "
        "trace and span ids of the current span",
    )
    parser.add_argument(
        "--event-loop",
        choices=EVENT_LOOPS,
        default=_env("event-loop", defaults.event_loop),
        help="uvloop's (default: asyncio's loop in C, less CPU) or asyncio's own",
    )
    args = parser.parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    try:
        return HubSettings(
            host=args.host,
            port=args.port,
            store=args.store,
            advertise_url=args.advertise_url or None,
            election_ttl_seconds=args.election_ttl,
            users_file=Path(args.users_file) if args.users_file else None,
            secrets_dir=Path(args.secrets_dir) if args.secrets_dir else None,
            offer_timeout_seconds=args.offer_timeout,
            log_dir=Path(args.log_dir) if args.log_dir else None,
            log_retention_seconds=args.log_retention,
            log_retention_bytes=args.log_retention_bytes,
            tls_cert=Path(args.tls_cert) if args.tls_cert else None,
            tls_key=Path(args.tls_key) if args.tls_key else None,
            event_loop=args.event_loop,
            certificate_authority=(
                Path(args.certificate_authority) if args.certificate_authority else None
            ),
            fair_share_half_life_seconds=args.fair_share_half_life,
            fair_share_calc_period_seconds=args.fair_share_calc_period,
            fair_share_resource_weights=_weights(
                parser, args.fair_share_weight or (_env("fair-share-weight") or "cpu=1").split(",")
            ),
        )
    except ValidationError as exc:
        parser.error(str(exc))
        raise  # unreachable: parser.error exits


def _weights(parser: argparse.ArgumentParser, pairs: list[str]) -> dict[str, float]:
    weights: dict[str, float] = {}
    for pair in pairs:
        resource, sep, weight = pair.partition("=")
        try:
            value = float(weight)
        except ValueError:
            value = -1.0
        if not sep or not resource.strip() or not 0 <= value < float("inf"):
            parser.error(f"--fair-share-weight {pair!r}: give RESOURCE=WEIGHT, a weight >= 0")
        weights[resource.strip()] = value
    return weights


def server_tls(settings: HubSettings) -> ssl.SSLContext | None:
    """The TLS context to serve with (None: plain HTTP); a SettingsError names the file that
    does not load."""
    if settings.tls_cert is None or settings.tls_key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(settings.tls_cert, settings.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise SettingsError(
            f"cannot load the TLS certificate {settings.tls_cert} with the key "
            f"{settings.tls_key}: {exc}"
        ) from exc
    return context


def hash_token_command(argv: Sequence[str]) -> int:
    """`multiq-hub hash-token [TOKEN]`: print the tokenHash of TOKEN (else of stdin's first
    line, which keeps the token out of the shell's history and the process list)."""
    parser = argparse.ArgumentParser(
        prog="multiq-hub hash-token",
        description="Print the salted scrypt hash of a bearer token, for the users file's "
        "tokenHash (the token is read from standard input when not given).",
    )
    parser.add_argument("token", nargs="?")
    args = parser.parse_args(argv)
    token = args.token if args.token is not None else sys.stdin.readline().strip()
    if not token:
        parser.error("no token given (as an argument or on standard input)")
    print(hash_token(token))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hash-token"]:
        return hash_token_command(argv[1:])
    settings = parse_settings(argv)
    try:
        # Before the app is built: its parts take their tracer when they are made.
        configure_tracing("multiq-hub")
        if settings.users_file is not None:
            load_users_file(settings.users_file)  # refused here, before anything starts
        tls = server_tls(settings)
    except (TracingConfigError, SettingsError) as exc:
        print(f"multiq-hub: {exc}", file=sys.stderr)
        return 2
    print(
        f"multiq-hub {VERSION} listening on {settings.scheme}://{settings.host}:{settings.port}"
        f" (advertised as {settings.url})",
        flush=True,
    )
    app = build_app(settings)
    build_schemas()
    tune_collector()  # (what start-up built, pydantic schemas too, is never collected)
    web.run_app(
        app,
        host=settings.host,
        port=settings.port,
        ssl_context=tls,
        print=None,
        access_log=None,
        loop=new_event_loop(settings.event_loop),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
