"""What a bearer token costs a request: GETs per second of one object with a user's token,
sequentially over one keep-alive connection to a real hub on a loopback socket, and the cost of
the one slow check (scrypt) a token gets before its principal is remembered.

    python -m bench.hub_auth [--requests 2000]

Prints JSON: {"requests", "seconds", "requests_per_second", "slow_check_seconds"}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import aiohttp
import yaml
from aiohttp.test_utils import TestServer

from api.tokens import hash_token, parse_token_hash
from hub.app import build_app
from hub.settings import HubSettings

TOKEN = "bench-admin-token"
FLAVOR = {
    "apiVersion": "multiq.dev/v1alpha1",
    "kind": "ResourceFlavor",
    "metadata": {"name": "default"},
}


async def measure(requests: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="multiq-auth-bench-") as directory:
        tmp = Path(directory)
        users = tmp / "users.yaml"
        entry = {"name": "admin", "tokenHash": hash_token(TOKEN), "groups": ["multiq:admins"]}
        users.write_text(yaml.safe_dump({"users": [entry]}))
        settings = HubSettings(store=f"sqlite:{tmp / 'hub.db'}", users_file=users)
        server = TestServer(await build_app(settings), host="127.0.0.1")
        await server.start_server()
        headers = {"Authorization": f"Bearer {TOKEN}"}
        base = str(server.make_url("")).rstrip("/") + "/apis/multiq.dev/v1alpha1/resourceflavors"
        try:
            async with aiohttp.ClientSession(headers=headers) as http:
                async with http.post(base, json=FLAVOR) as created:
                    assert created.status == 201, await created.text()
                started = time.perf_counter()
                for _ in range(requests):
                    async with http.get(f"{base}/default") as response:
                        assert response.status == 200
                        await response.read()
                seconds = time.perf_counter() - started
        finally:
            await server.close()
    parsed = parse_token_hash(entry["tokenHash"])  # type: ignore[arg-type]
    started = time.perf_counter()
    parsed.matches(TOKEN)
    slow = time.perf_counter() - started
    return {
        "requests": requests,
        "seconds": round(seconds, 3),
        "requests_per_second": round(requests / seconds, 1),
        "slow_check_seconds": round(slow, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.requests))))


if __name__ == "__main__":
    main()
