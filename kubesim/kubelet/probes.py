"""Readiness and liveness probes for the process runtime, run as the kubelet runs them.

`probe_once` performs one check: `httpGet` (a plain HTTP/1.1 GET on 127.0.0.1 — pods share
the host's network — at the port, named ports resolved from the container's ports; 200-399
passes; HTTPS is not verified, as the kubelet does not), `tcpSocket` (a connection), `exec`
(the command inside the container's mount namespace via `nsenter`, with its environment;
exit 0 passes). `grpc` is not modelled and always passes.

`ProbeSchedule` is the pure bookkeeping of one probe: initialDelaySeconds, periodSeconds,
timeoutSeconds, successThreshold and failureThreshold (defaults 0/10/1/1/3) turned into "is
it passing now" after each result. The process runtime (`kubesim.kubelet.process`) runs one
loop per probed container: a readiness result changes the container's `ready` (and so the
pod's Ready condition and Service endpoints); a liveness failure past the threshold kills the
container, which restarts by its pod's restartPolicy. startupProbe is not modelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import ssl
from dataclasses import dataclass
from typing import Any

from kubesim.objects import JsonObject

__all__ = ["ProbeResult", "ProbeSchedule", "probe_once"]


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    message: str = ""


@dataclass
class ProbeSchedule:
    """One probe's timing and thresholds, and whether it passes after the results so far."""

    initial_delay: float
    period: float
    timeout: float
    success_threshold: int
    failure_threshold: int
    passing: bool
    _successes: int = 0
    _failures: int = 0

    @classmethod
    def of(cls, probe: JsonObject, *, passing_at_start: bool) -> ProbeSchedule:
        return cls(
            initial_delay=float(probe.get("initialDelaySeconds", 0)),
            period=float(probe.get("periodSeconds", 10)),
            timeout=float(probe.get("timeoutSeconds", 1)),
            success_threshold=int(probe.get("successThreshold", 1)),
            failure_threshold=int(probe.get("failureThreshold", 3)),
            passing=passing_at_start,
        )

    def record(self, ok: bool) -> bool:
        """Count one result; True when `passing` changed."""
        before = self.passing
        if ok:
            self._successes, self._failures = self._successes + 1, 0
            if self._successes >= self.success_threshold:
                self.passing = True
        else:
            self._failures, self._successes = self._failures + 1, 0
            if self._failures >= self.failure_threshold:
                self.passing = False
        return self.passing != before


def _port(value: Any, container: JsonObject) -> int | None:
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    for port in container.get("ports") or ():
        if port.get("name") == value:
            return int(port["containerPort"])
    return None


async def _http_get(action: JsonObject, container: JsonObject, within: float) -> ProbeResult:
    port = _port(action.get("port"), container)
    if port is None:
        return ProbeResult(False, f"unknown port {action.get('port')!r}")
    path = str(action.get("path") or "/")
    headers = "".join(
        f"{h.get('name')}: {h.get('value')}\r\n" for h in action.get("httpHeaders") or ()
    )
    context: ssl.SSLContext | None = None
    if str(action.get("scheme", "HTTP")).upper() == "HTTPS":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        async with asyncio.timeout(within):
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
            try:
                writer.write(
                    f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                    f"User-Agent: kube-probe/1.32\r\n{headers}Connection: close\r\n\r\n".encode()
                )
                await writer.drain()
                status_line = await reader.readline()
            finally:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
    except (OSError, TimeoutError) as error:
        return ProbeResult(False, f'Get "http://127.0.0.1:{port}{path}": {error}')
    parts = status_line.decode(errors="replace").split()
    code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    if 200 <= code < 400:
        return ProbeResult(True)
    return ProbeResult(False, f"HTTP probe failed with statuscode: {code}")


async def _tcp(action: JsonObject, container: JsonObject, within: float) -> ProbeResult:
    port = _port(action.get("port"), container)
    if port is None:
        return ProbeResult(False, f"unknown port {action.get('port')!r}")
    try:
        async with asyncio.timeout(within):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()
    except (OSError, TimeoutError) as error:
        return ProbeResult(False, f"dial tcp 127.0.0.1:{port}: {error}")
    return ProbeResult(True)


async def _exec(
    action: JsonObject, pid: int | None, env: dict[str, str], within: float
) -> ProbeResult:
    command = [str(c) for c in action.get("command") or ()]
    if not command:
        return ProbeResult(False, "exec probe has no command")
    if pid is not None and shutil.which("nsenter"):
        command = ["nsenter", f"--mount=/proc/{pid}/ns/mnt", "--", *command]
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
        )
    except OSError as error:
        return ProbeResult(False, str(error))
    try:
        async with asyncio.timeout(within):
            output, _ = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        return ProbeResult(False, f"command timed out after {within:g}s")
    if process.returncode == 0:
        return ProbeResult(True)
    return ProbeResult(False, output.decode(errors="replace").strip())


async def probe_once(
    probe: JsonObject, container: JsonObject, *, pid: int | None, env: dict[str, str]
) -> ProbeResult:
    within = float(probe.get("timeoutSeconds", 1))
    if "httpGet" in probe:
        return await _http_get(probe["httpGet"], container, within)
    if "tcpSocket" in probe:
        return await _tcp(probe["tcpSocket"], container, within)
    if "exec" in probe:
        return await _exec(probe["exec"], pid, env, within)
    return ProbeResult(True)
