"""A writer process for the crash test: creates objects forever, acknowledging each on stdout
only after `create` returned (the moment the hub would answer 201). The test SIGKILLs it.

Run as `python -m tests.hub.store.sqlite_writer_child PATH CONCURRENCY`.
"""

from __future__ import annotations

import asyncio
import itertools
import sys

from hub.store.sqlite import SqliteStore


async def main(path: str, concurrency: int) -> None:
    store = await SqliteStore.open(path)
    counter = itertools.count()

    async def writer() -> None:
        while True:
            key = f"/acked/{next(counter):08d}"
            created = await store.create(key, {"payload": "x" * 200})
            sys.stdout.write(f"{key} {created.revision}\n")
            sys.stdout.flush()

    await asyncio.gather(*(writer() for _ in range(concurrency)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
