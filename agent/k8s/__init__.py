"""The agent's view of its member cluster: a typed facade over kubernetes_asyncio
(`client`) and never-ending list-then-watch streams (`watching`)."""
