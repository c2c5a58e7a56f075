"""The MultiQ contract: every object the hub stores, agents receive, qctl prints and users write.

Nothing here does I/O. Components import these models; this package imports no component.
"""
