"""The certificate authority and serving certificate behind each cluster's HTTPS port.

A real cluster's API is HTTPS only, and clients rely on it: kubectl sends bearer tokens only
over TLS, and kubernetes_asyncio's in-cluster loader connects to
`https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT` trusting the service account's
`ca.crt`. So every cluster also serves its API on a TLS port (plain HTTP stays for tests and
the admin kubeconfig). The material is made once per process with the openssl CLI (an EC
P-256 CA and a serving certificate for 127.0.0.1, localhost and the `kubernetes.default.svc`
names), in a private temporary directory removed at exit; every cluster of the process shares
it. Used by `kubesim.cluster` (the TLS site, the `kube-root-ca.crt` ConfigMaps).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import ssl
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TlsMaterial", "serving_material"]

_SUBJECT_ALT_NAMES = ",".join(
    [
        "IP:127.0.0.1",
        "DNS:localhost",
        "DNS:kubernetes",
        "DNS:kubernetes.default",
        "DNS:kubernetes.default.svc",
        "DNS:kubernetes.default.svc.cluster.local",
    ]
)
_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


@dataclass(frozen=True)
class TlsMaterial:
    ca_cert: Path
    cert: Path
    key: Path

    @property
    def ca_pem(self) -> str:
        return self.ca_cert.read_text()

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        return context


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@functools.cache
def serving_material() -> TlsMaterial:
    """The process's CA and serving certificate, made on first use (about 30 ms)."""
    directory = Path(tempfile.mkdtemp(prefix="kubesim-tls-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    _openssl(
        "req", "-x509", *_EC, "-keyout", "ca.key", "-out", "ca.crt", "-days", "3650",
        "-subj", "/CN=kubesim-ca",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "req", *_EC, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=kube-apiserver",
        cwd=directory,
    )  # fmt: skip
    (directory / "ext.cnf").write_text(
        f"subjectAltName={_SUBJECT_ALT_NAMES}\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
    )
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.crt", "-days", "3650", "-extfile", "ext.cnf",
        cwd=directory,
    )  # fmt: skip
    return TlsMaterial(directory / "ca.crt", directory / "server.crt", directory / "server.key")
