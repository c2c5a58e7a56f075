"""qctl's contexts: which hub to talk to, with which token, in which namespace.

The file is `$MULTIQ_CONFIG`, else `$XDG_CONFIG_HOME/multiq/config.yaml`, else
`~/.config/multiq/config.yaml`::

    currentContext: local
    contexts:
      - name: local
        server: http://127.0.0.1:8470
        token: dev-admin-token
        namespace: default
      - name: prod
        server: https://hub.example.org:8470
        certificateAuthority: /etc/multiq/ca.crt   # PEM: trust this CA for https hubs

Several hubs sharing one store are named together: `server: http://h1:8470,http://h2:8470`
(or a YAML list), `--server URL,URL`, `MULTIQ_SERVER=URL,URL`. qctl tries them in order and
moves on when one cannot be reached; any hub serves any request (those that do not lead
forward writes to the one that does).

An https hub's certificate is checked against `certificateAuthority` (as kubeconfig's
certificate-authority; `--certificate-authority`, MULTIQ_CERTIFICATE_AUTHORITY), else against
the system's CAs. Flags beat environment variables (MULTIQ_SERVER, MULTIQ_TOKEN,
MULTIQ_CONTEXT, MULTIQ_NAMESPACE, MULTIQ_CERTIFICATE_AUTHORITY), which beat the file.
qctl writes the file as JSON (indented), which YAML reads as it is: a file written by hand, or
by an older qctl, in YAML still loads. Reading tries JSON first and loads the YAML parser only
when that fails: every command that talks to the hub reads the file, and the parser's import
costs more than such a command's request.

Called by: qctl.main (resolve) and `qctl dev up` (writes a context for the local federation).
"""

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

from qctl.errors import InputError, QctlError, UsageError

__all__ = [
    "ConfigFile",
    "Context",
    "ResolvedContext",
    "config_path",
    "load",
    "resolve",
    "save",
    "split_servers",
]


class ConfigInvalidError(QctlError):
    """A part of the config file is not what qctl writes (the message names where)."""


# NamedTuples and a plain class, not dataclasses: importing dataclasses would cost every qctl
# command more start-up time than the rest of this module.


class Context(NamedTuple):
    name: str
    server: str
    """One hub's URL, or several hubs' separated by commas (a YAML list is accepted too)."""
    token: str | None = None
    namespace: str = "default"
    certificate_authority: str | None = None
    """A PEM file of the CA(s) to trust for an https hub (None: the system's)."""

    @classmethod
    def from_file(cls, where: str, raw: object) -> "Context":
        fields = _mapping(
            where,
            raw,
            required=("name", "server"),
            optional=("token", "namespace", "certificateAuthority"),
        )
        ca = fields.get("certificateAuthority")
        server = fields["server"]
        if isinstance(server, list):
            server = ",".join(str(s) for s in server)
        return cls(
            name=_text(f"{where}.name", fields["name"]),
            server=_text(f"{where}.server", server),
            token=None if fields.get("token") is None else _text(f"{where}.token", fields["token"]),
            namespace=_text(f"{where}.namespace", fields.get("namespace", "default")),
            certificate_authority=(
                None if ca is None else _text(f"{where}.certificateAuthority", ca)
            ),
        )

    def to_file(self) -> dict[str, Any]:
        body: dict[str, Any] = {"name": self.name, "server": self.server}
        if self.token is not None:
            body["token"] = self.token
        body["namespace"] = self.namespace
        if self.certificate_authority is not None:
            body["certificateAuthority"] = self.certificate_authority
        return body


class ConfigFile:
    def __init__(
        self, current_context: str | None = None, contexts: list[Context] | None = None
    ) -> None:
        self.current_context = current_context
        self.contexts = list(contexts or [])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConfigFile) and self.to_file() == other.to_file()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"ConfigFile({self.current_context!r}, {self.contexts!r})"

    @classmethod
    def from_file(cls, raw: object) -> "ConfigFile":
        fields = _mapping("config", raw, required=(), optional=("currentContext", "contexts"))
        current = fields.get("currentContext")
        contexts = fields.get("contexts")
        contexts = [] if contexts is None else contexts
        if not isinstance(contexts, list):
            raise ConfigInvalidError("contexts: must be a list")
        return cls(
            current_context=None if current is None else _text("currentContext", current),
            contexts=[Context.from_file(f"contexts[{i}]", c) for i, c in enumerate(contexts)],
        )

    def to_file(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.current_context is not None:
            body["currentContext"] = self.current_context
        body["contexts"] = [c.to_file() for c in self.contexts]
        return body

    def find(self, name: str) -> Context | None:
        return next((c for c in self.contexts if c.name == name), None)

    def upsert(self, context: Context, *, make_current: bool = True) -> None:
        self.contexts = [c for c in self.contexts if c.name != context.name] + [context]
        if make_current:
            self.current_context = context.name


def _mapping(
    where: str, raw: object, *, required: tuple[str, ...], optional: tuple[str, ...]
) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigInvalidError(f"{where}: must be a mapping")
    unknown = sorted(str(k) for k in raw if k not in required and k not in optional)
    if unknown:
        raise ConfigInvalidError(f"{where}: unknown field(s) {', '.join(unknown)}")
    missing = [k for k in required if k not in raw]
    if missing:
        raise ConfigInvalidError(f"{where}: missing field(s) {', '.join(missing)}")
    return raw


def _text(where: str, value: object) -> str:
    if not isinstance(value, str):
        raise ConfigInvalidError(f"{where}: must be a string")
    return value


class ResolvedContext(NamedTuple):
    server: str
    """One hub's URL, or several separated by commas."""
    token: str | None
    namespace: str
    source: str
    certificate_authority: str | None = None
    """A PEM file of the CA(s) to trust for https hubs (None: the system's)."""

    @property
    def servers(self) -> tuple[str, ...]:
        """Every hub's URL, in the order to try them."""
        return split_servers(self.server)


def split_servers(text: str) -> tuple[str, ...]:
    return tuple(u.strip().rstrip("/") for u in text.split(",") if u.strip())


def config_path() -> Path:
    explicit = os.environ.get("MULTIQ_CONFIG")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "multiq" / "config.yaml"


def load(path: Path | None = None) -> ConfigFile:
    path = path or config_path()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return ConfigFile()
    except OSError as exc:
        raise InputError(f"{path}: not a valid qctl config: {exc}") from exc
    try:
        raw = json.loads(text)
    except ValueError:
        raw = _load_yaml(path, text)
    try:
        return ConfigFile.from_file(raw or {})
    except ConfigInvalidError as exc:
        raise InputError(f"{path}: not a valid qctl config: {exc}") from exc


def _load_yaml(path: Path, text: str) -> object:
    import yaml  # noqa: PLC0415 - only a file that is not JSON needs it

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not a valid qctl config: {exc}") from exc


def save(config: ConfigFile, path: Path | None = None) -> Path:
    """Write the file as JSON (which is YAML too), readable by its owner only."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(config.to_file(), indent=2) + "\n")
    tmp.chmod(0o600)  # it holds tokens
    tmp.replace(path)
    return path


def resolve(
    *,
    server: str | None = None,
    token: str | None = None,
    context: str | None = None,
    namespace: str | None = None,
    certificate_authority: str | None = None,
) -> ResolvedContext:
    """Combine flags, environment and the config file into the connection to use."""
    env = os.environ
    config = load()
    name = context or env.get("MULTIQ_CONTEXT") or config.current_context
    ctx = config.find(name) if name else None
    if name and ctx is None and (context or env.get("MULTIQ_CONTEXT")):
        raise UsageError(f"no context named {name!r} in {config_path()}")
    chosen_server = server or env.get("MULTIQ_SERVER") or (ctx.server if ctx else None)
    if not chosen_server:
        raise UsageError(
            "no hub to talk to: pass --server, set MULTIQ_SERVER, or run `qctl dev up`, "
            f"which writes a context to {config_path()}"
        )
    servers = split_servers(chosen_server)
    if not servers:
        raise UsageError(f"no hub URL in {chosen_server!r}")
    return ResolvedContext(
        server=",".join(servers),
        token=token or env.get("MULTIQ_TOKEN") or (ctx.token if ctx else None),
        namespace=namespace or env.get("MULTIQ_NAMESPACE") or (ctx.namespace if ctx else "default"),
        source=f"context {ctx.name!r}" if ctx else "flags and environment",
        certificate_authority=certificate_authority
        or env.get("MULTIQ_CERTIFICATE_AUTHORITY")
        or (ctx.certificate_authority if ctx else None),
    )
