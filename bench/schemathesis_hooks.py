"""Schemathesis hooks for bench.fuzz_api: a generated watch (`?watch=true`) asks the hub to end
it after a second (`timeoutSeconds=1`), so that schemathesis reads it to its end instead of
giving up on a stream that lasts until the client hangs up (which it counted as an error, one
per list route). The watch's other parameters stay as generated.

Loaded by schemathesis from its file path (`SCHEMATHESIS_HOOKS`, set by
bench.fuzz_api.run_schemathesis); not imported by anything else.
"""

from __future__ import annotations

from typing import Any

import schemathesis

WATCH_SECONDS = 1


@schemathesis.hook
def before_call(ctx: Any, case: Any, **kwargs: Any) -> None:
    query = case.query
    if query and str(query.get("watch")).lower() in ("true", "1"):
        query["timeoutSeconds"] = WATCH_SECONDS
