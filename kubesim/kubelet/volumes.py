"""Pod volumes for the process runtime: their files on the host, and each container's view.

`VolumeBuilder.mounts` writes the pod's volumes under `<pod dir>/volumes/<name>` — Secret and
ConfigMap keys (with `items`, `defaultMode`, `optional`), projected volumes (service-account
tokens minted by the cluster's `TokenIssuer` and bound to the pod, ConfigMaps, Secrets, the
downward API), downwardAPI volumes, emptyDir — and resolves PersistentVolumeClaims to
`<pvc root>/<namespace>/<claim>` (the claim must exist) and hostPath to the host path itself.
A missing non-optional Secret, ConfigMap, claim or service account raises `MountError` with
the kubelet's FailedMount message; the runtime keeps the container waiting and retries.

`contained_command` wraps a container's argv so it runs in a private mount namespace
(`unshare --mount --propagation private`) where a small sh script bind-mounts each volume at
its mountPath (read-only when asked; subPath honoured) and a generated /etc/hosts over the
host's, then `exec`s the command: the same process, now seeing its volumes where the pod spec
says. The mounts are one `mount -a` of a per-container fstab where they allow it (each
program the script starts is a good part of what a short pod costs). Missing mount points
are created on the host as empty directories (and left there); nothing is mounted outside
the container's namespace. Needs root and util-linux `unshare` (`mount_namespaces_available`);
without them the runtime runs containers unmounted.

Token lifetime: the admission-injected 3607 s token is extended to a year, as
kube-apiserver's `--service-account-extend-token-expiration` does, so long-running pods never
need it refreshed. Called by `kubesim.kubelet.process`.
"""

from __future__ import annotations

import base64
import functools
import os
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kubesim.apiserver.admission import PROJECTED_TOKEN_SECONDS
from kubesim.apiserver.authn import DEFAULT_AUDIENCES, TokenIssuer
from kubesim.apiserver.registry import ObjectRegistry
from kubesim.kubelet.env import field_value
from kubesim.objects import JsonObject

__all__ = [
    "Mount",
    "MountError",
    "VolumeBuilder",
    "contained_command",
    "mount_namespaces_available",
]

_EXTENDED_TOKEN_SECONDS = 365 * 24 * 3600
_DEFAULT_MODE = 0o644


class MountError(Exception):
    """A volume cannot be set up yet (its source does not exist); the kubelet retries."""


@dataclass(frozen=True)
class Mount:
    source: Path
    target: str
    read_only: bool


@functools.cache
def mount_namespaces_available() -> bool:
    return os.geteuid() == 0 and _unshare() is not None


@functools.cache
def _unshare() -> str | None:
    """Where `unshare` is, found once: a bare name would be looked for along PATH at every
    container start, and the runtime's event loop waits for the child's exec (vfork)."""
    return shutil.which("unshare")


def _write_files(directory: Path, files: dict[str, bytes], mode: int) -> None:
    """Make the directory hold exactly `files` (relative paths, nested allowed), in place:
    other containers of the pod may have it mounted already, and a mount holds on to the
    directory itself, so it is never replaced, only its files are."""
    directory.mkdir(parents=True, exist_ok=True)
    wanted = {directory / relative for relative in files}
    for existing in sorted(directory.rglob("*"), reverse=True):
        if existing.is_file() and existing not in wanted:
            existing.unlink()
    for relative, content in files.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_bytes() != content:
            path.write_bytes(content)
        path.chmod(mode)


def _keyed(
    data: dict[str, bytes], items: list[JsonObject] | None, what: str, optional: bool
) -> dict[str, bytes]:
    if not items:
        return dict(data)
    chosen: dict[str, bytes] = {}
    for item in items:
        key = str(item.get("key", ""))
        if key not in data:
            if optional:
                continue
            raise MountError(f"configuration error: {what} has no key {key!r}")
        chosen[str(item.get("path", key))] = data[key]
    return chosen


class VolumeBuilder:
    """Materialises one cluster's pod volumes on the host."""

    def __init__(
        self,
        registry: ObjectRegistry,
        tokens: TokenIssuer,
        *,
        pvc_root: Callable[[], Path],
        now: Callable[[], int],
    ) -> None:
        self.registry = registry
        self.tokens = tokens
        self.pvc_root = pvc_root
        self.now = now

    def _find(self, plural: str, namespace: str, name: str) -> JsonObject | None:
        return self.registry.find(self.registry.types.core(plural), namespace, name)

    def _config_data(self, namespace: str, name: str, optional: bool) -> dict[str, bytes] | None:
        config_map = self._find("configmaps", namespace, name)
        if config_map is None:
            if optional:
                return None
            raise MountError(f'configmap "{name}" not found')
        data = {k: str(v).encode() for k, v in (config_map.get("data") or {}).items()}
        for key, value in (config_map.get("binaryData") or {}).items():
            data[key] = base64.b64decode(value)
        return data

    def _secret_data(self, namespace: str, name: str, optional: bool) -> dict[str, bytes] | None:
        secret = self._find("secrets", namespace, name)
        if secret is None:
            if optional:
                return None
            raise MountError(f'secret "{name}" not found')
        data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
        data.update({k: str(v).encode() for k, v in (secret.get("stringData") or {}).items()})
        return data

    def _token(self, pod: JsonObject, seconds: int, audience: str | None) -> bytes:
        namespace = pod["metadata"]["namespace"]
        name = pod.get("spec", {}).get("serviceAccountName") or "default"
        account = self._find("serviceaccounts", namespace, name)
        if account is None:
            raise MountError(f'serviceaccount "{name}" not found')
        if seconds == PROJECTED_TOKEN_SECONDS:
            seconds = _EXTENDED_TOKEN_SECONDS
        token, _ = self.tokens.issue(
            account,
            now=self.now(),
            expiration_seconds=seconds,
            audiences=(audience,) if audience else DEFAULT_AUDIENCES,
            bound_pod=pod,
        )
        return token.encode()

    def _downward(self, pod: JsonObject, items: list[JsonObject]) -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        for item in items:
            ref = item.get("fieldRef")
            if ref:
                files[str(item["path"])] = field_value(pod, str(ref.get("fieldPath", ""))).encode()
        return files

    def _projected(self, pod: JsonObject, projected: JsonObject) -> dict[str, bytes]:
        namespace = pod["metadata"]["namespace"]
        files: dict[str, bytes] = {}
        for source in projected.get("sources") or ():
            if "serviceAccountToken" in source:
                token = source["serviceAccountToken"]
                files[str(token.get("path", "token"))] = self._token(
                    pod, int(token.get("expirationSeconds", 3600)), token.get("audience")
                )
            elif "configMap" in source:
                ref = source["configMap"]
                data = self._config_data(namespace, ref.get("name", ""), bool(ref.get("optional")))
                if data is not None:
                    what = f'configmap "{ref.get("name")}"'
                    files.update(_keyed(data, ref.get("items"), what, bool(ref.get("optional"))))
            elif "secret" in source:
                ref = source["secret"]
                data = self._secret_data(namespace, ref.get("name", ""), bool(ref.get("optional")))
                if data is not None:
                    what = f'secret "{ref.get("name")}"'
                    files.update(_keyed(data, ref.get("items"), what, bool(ref.get("optional"))))
            elif "downwardAPI" in source:
                files.update(self._downward(pod, source["downwardAPI"].get("items") or []))
        return files

    def _volume_dir(self, pod: JsonObject, volume: JsonObject, root: Path) -> Path:
        namespace = pod["metadata"]["namespace"]
        directory = root / "volumes" / str(volume["name"])
        mode = _DEFAULT_MODE
        files: dict[str, bytes] | None = None
        if "secret" in volume:
            ref = volume["secret"]
            mode = int(ref.get("defaultMode", _DEFAULT_MODE))
            optional = bool(ref.get("optional"))
            data = self._secret_data(namespace, ref.get("secretName", ""), optional)
            what = f'secret "{ref.get("secretName")}"'
            files = _keyed(data or {}, ref.get("items"), what, optional)
        elif "configMap" in volume:
            ref = volume["configMap"]
            mode = int(ref.get("defaultMode", _DEFAULT_MODE))
            optional = bool(ref.get("optional"))
            data = self._config_data(namespace, ref.get("name", ""), optional)
            what = f'configmap "{ref.get("name")}"'
            files = _keyed(data or {}, ref.get("items"), what, optional)
        elif "projected" in volume:
            mode = int(volume["projected"].get("defaultMode", _DEFAULT_MODE))
            files = self._projected(pod, volume["projected"])
        elif "downwardAPI" in volume:
            files = self._downward(pod, volume["downwardAPI"].get("items") or [])
        elif "persistentVolumeClaim" in volume:
            claim = str(volume["persistentVolumeClaim"].get("claimName", ""))
            if self._find("persistentvolumeclaims", namespace, claim) is None:
                raise MountError(f'persistentvolumeclaim "{claim}" not found')
            claim_dir: Path = self.pvc_root() / namespace / claim
            claim_dir.mkdir(parents=True, exist_ok=True)
            return claim_dir
        elif "hostPath" in volume:
            host = Path(str(volume["hostPath"].get("path", "/")))
            kind = volume["hostPath"].get("type", "")
            if kind == "DirectoryOrCreate":
                host.mkdir(parents=True, exist_ok=True)
            elif not host.exists():
                raise MountError(f"hostPath type check failed: {host} does not exist")
            return host
        else:  # emptyDir, and anything kubesim does not model: an empty directory
            directory.mkdir(parents=True, exist_ok=True)
            return directory
        _write_files(directory, files, mode)
        return directory

    def mounts(self, pod: JsonObject, container: JsonObject, pod_dir: Path) -> list[Mount]:
        """Set the container's volumes up on the host; (host path, mountPath) pairs."""
        volumes = {str(v.get("name")): v for v in pod.get("spec", {}).get("volumes") or ()}
        ready: dict[str, Path] = {}
        mounts: list[Mount] = []
        for mount in container.get("volumeMounts") or ():
            name = str(mount.get("name", ""))
            volume = volumes.get(name)
            if volume is None:
                raise MountError(f'volume "{name}" not found in the pod spec')
            if name not in ready:
                try:
                    ready[name] = self._volume_dir(pod, volume, pod_dir)
                except MountError as error:
                    raise MountError(
                        f'MountVolume.SetUp failed for volume "{name}" : {error}'
                    ) from error
            source = ready[name]
            sub_path = mount.get("subPath")
            if sub_path:
                source = source / str(sub_path)
                if not source.exists():
                    source.mkdir(parents=True)
            mounts.append(
                Mount(source, str(mount.get("mountPath", "")), bool(mount.get("readOnly")))
            )
        return mounts


def _with_hosts(mounts: list[Mount], hosts: Path | None) -> list[Mount]:
    """The container's mounts, then its generated /etc/hosts (read-only) over the host's."""
    return [*mounts, *([Mount(hosts, "/etc/hosts", True)] if hosts else [])]


def _on_host(path: str, mounted: list[str], check: Callable[[str], bool]) -> bool:
    """`check(path)` holds as a mount script will find it: on the host, and not under a
    target it mounted before (what is there then is the volume's)."""
    under = any(path == t or path.startswith(t.rstrip("/") + "/") for t in mounted)
    return not under and check(path)


def _mount_script(mounts: list[Mount], hosts: Path | None, working_dir: str | None) -> str:
    """The sh script that mounts each volume, then execs the container's command. Every step
    the host already satisfies is left out (a mount point that exists, the working directory),
    and a read-only bind is one `mount -o bind,ro` (util-linux 2.27 and later remount it
    read-only itself): each step is a process of its own, and a pod that runs a short command
    would otherwise spend most of its start on them."""
    steps: list[str] = []
    mounted: list[str] = []  # targets this script mounts before the step at hand
    every = _with_hosts(mounts, hosts)
    for mount in every:
        source, target = shlex.quote(str(mount.source)), shlex.quote(mount.target)
        if mount.source.is_dir():
            if not _on_host(mount.target, mounted, os.path.isdir):
                steps.append(f"mkdir -p {target}")
        elif not _on_host(mount.target, mounted, os.path.exists):
            parent = os.path.dirname(mount.target.rstrip("/")) or "/"
            if not _on_host(parent, mounted, os.path.isdir):
                steps.append(f"mkdir -p {shlex.quote(parent)}")
            steps.append(f"{{ [ -e {target} ] || : > {target}; }}")
        steps.append(f"mount -o {'bind,ro' if mount.read_only else 'bind'} {source} {target}")
        mounted.append(mount.target)
    if working_dir:
        if not _on_host(working_dir, mounted, os.path.isdir):
            steps.append(f"mkdir -p {shlex.quote(working_dir)}")
        steps.append(f"cd {shlex.quote(working_dir)}")
    steps.append('exec "$@"')
    return " && ".join(steps)


def _fstab_field(path: str) -> str:
    """A path as fstab(5) writes it: space, tab, newline and backslash as octal escapes."""
    for raw, escaped in (("\\", "\\134"), (" ", "\\040"), ("\t", "\\011"), ("\n", "\\012")):
        path = path.replace(raw, escaped)
    return path


def _fstab(mounts: list[Mount], hosts: Path | None) -> str | None:
    """The container's mounts as one fstab for a single `mount -a` (each mount point made
    when missing, inside what this fstab mounted before it, by `X-mount.mkdir`), or None when
    a file must be mounted where none exists: that needs the step-by-step script."""
    lines: list[str] = []
    mounted: list[str] = []
    every = _with_hosts(mounts, hosts)
    for mount in every:
        options = "bind,ro" if mount.read_only else "bind"
        if mount.source.is_dir():
            options += ",X-mount.mkdir"
        elif not _on_host(mount.target, mounted, os.path.exists):
            return None
        lines.append(
            f"{_fstab_field(str(mount.source))} {_fstab_field(mount.target)} none {options} 0 0"
        )
        mounted.append(mount.target)
    return "".join(f"{line}\n" for line in lines)


def contained_command(
    argv: list[str],
    mounts: list[Mount],
    hosts: Path | None,
    working_dir: str | None = None,
    *,
    fstab: Path | None = None,
) -> list[str]:
    """`argv` run in a private mount namespace that shows it `mounts` (and `hosts`), in
    `working_dir` as the container sees it. Given `fstab` (a file of the pod's own), the
    mounts are written there and made by one `mount -a`, one process instead of one per
    mount, where they allow it (`_fstab`)."""
    if not mounts and hosts is None:
        return argv
    table = _fstab(mounts, hosts) if fstab is not None else None
    if fstab is not None and table is not None:
        fstab.write_text(table)
        steps = [f"mount -a -T {shlex.quote(str(fstab))}"]
        if working_dir:
            mounted = [m.target for m in mounts]
            if not _on_host(working_dir, mounted, os.path.isdir):
                steps.append(f"mkdir -p {shlex.quote(working_dir)}")
            steps.append(f"cd {shlex.quote(working_dir)}")
        script = " && ".join([*steps, 'exec "$@"'])
    else:
        script = _mount_script(mounts, hosts, working_dir)
    unshare = _unshare() or "unshare"
    return [unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script,
            "kubesim-mount", *argv]  # fmt: skip
