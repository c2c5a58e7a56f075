"""What the hub's and the agent's processes share to run, beyond being observed
(telemetry): the event loop they run on (runtime.loop) and how their garbage collector is
tuned (runtime.collector).

Imported by hub.main and agent.main (the hub and the agent are otherwise independent); it
imports no component.
"""
