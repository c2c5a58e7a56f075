"""Servers build every contract model's schema at start-up (`api.meta.build_schemas`), not
inside their first requests; qctl, which does not call it, keeps building on first use."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_after_start_up_every_imported_contract_model_is_built_and_nothing_is_left() -> None:
    out = _run(
        """
        from api.meta import StrictModel, build_schemas
        import api.v1alpha1.messages, api.v1alpha1.workload, api.v1alpha1.conversions
        from api.v1alpha1.messages import DispatchOffer
        assert not DispatchOffer.__pydantic_complete__
        built = build_schemas()
        todo = [StrictModel]
        unbuilt = []
        while todo:
            model = todo.pop()
            todo += model.__subclasses__()
            if model.__module__.startswith("api.") and not model.__pydantic_complete__:
                unbuilt.append(model.__qualname__)
        print(built > 50, unbuilt, build_schemas())
        """
    )
    assert out == "True [] 0"


def test_the_hub_and_the_agent_build_them_before_freezing_the_collector() -> None:
    for module in ("hub.main", "agent.main"):
        source = _run(f"import inspect, {module} as m; print(inspect.getsource(m.main))")
        assert source.index("build_schemas()") < source.index("tune_collector()"), module
    out = _run(
        """
        import gc
        from runtime.collector import GC_THRESHOLDS, tune_collector
        tune_collector()
        print(gc.get_freeze_count() > 0, gc.get_threshold() == GC_THRESHOLDS)
        """
    )
    assert out == "True True"  # tune_collector is what freezes
