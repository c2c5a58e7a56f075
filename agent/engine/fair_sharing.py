"""Preemption-based fair sharing: dominant resource shares over the cohort tree.

Owns the share arithmetic of Kueue's fair sharing (kueue.md §3.1, hierarchical §3.2), read
by `cycle` (the order of heads across cluster queues) and `preemption` (which cluster
queue's workloads may be taken, by the configured strategies), and by the agent's status
writer (`weightedShare`). Pure: every function reads a `QuotaTree` as it is now.

- A node's borrowing of resource r is the sum over flavors of max(0, usage − SubtreeQuota);
  what its parent could lend of r is the sum over flavors of the parent's
  `potential_available` (the most the parent could ever get).
- Its dominant resource share (DRS) is the largest borrowed / lendable ratio over resources;
  a node without a parent shares nothing (0).
- The weighted share is DRS / weight (weight in milli-units, 1000 = weight 1). Weight 0:
  a node that borrows anything has an infinite share (it is always the first to give back
  and never wins by share); one that borrows nothing has share 0.
- The fair-sharing order (Kueue's tournament over the cohort tree): two cluster queues meet
  at their lowest common cohort and the side whose child there has the lower weighted share
  goes first. `tournament_key` gives that order as a tuple to sort by: the (share, name) of
  every node on the path from below the root down to the cluster queue.
- The fair level of a cohort (MultiQ's, not Kueue's; read by the `MultiQTowardFairShare`
  strategy): the weighted share every child of the cohort that is waiting for more would
  hold if what the children borrow now were shared out again by weight (water-filling).
  A child that waits for nothing keeps what it borrows if that is less; weight 0 gets
  nothing. It is the target a share should move toward: a preemption that ends with the
  preemptor's side above it, or the victim's side below it, moves a share away from it.
"""

from __future__ import annotations

import math
from collections.abc import Container, Mapping

from agent.engine.quota import QuotaNode, QuotaTree
from agent.engine.snapshot import FlavorResource

__all__ = [
    "dominant_resource_share",
    "fair_level",
    "share_with",
    "tournament_key",
    "weighted_share",
    "weighted_share_milli",
]


def dominant_resource_share(
    node: QuotaNode, usage: Mapping[FlavorResource, int] | None = None
) -> float:
    """Largest borrowed / lendable ratio over resources (0 at a root or when not borrowing).
    `usage` replaces the node's own usage (a share depends on nothing else that changes)."""
    parent = node.parent
    if parent is None:
        return 0.0
    borrowed: dict[str, int] = {}
    for fr, used in (node.usage if usage is None else usage).items():
        over = used - node.subtree.get(fr, 0)
        if over > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
    if not borrowed:
        return 0.0
    lendable = parent.lendable
    if lendable is None:
        lendable = parent.lendable = {}
        for fr in parent.subtree:
            room = QuotaTree.potential_available(parent, fr)
            lendable[fr[1]] = lendable.get(fr[1], 0) + room
    best = 0.0
    for res, amount in borrowed.items():
        room = lendable.get(res, 0)
        ratio = math.inf if room <= 0 else amount / room
        best = max(best, ratio)
    return best


def weighted_share(node: QuotaNode, usage: Mapping[FlavorResource, int] | None = None) -> float:
    """DRS divided by the node's weight (`QuotaNode.weight`, milli); `usage` as above."""
    drs = dominant_resource_share(node, usage)
    weight = node.weight
    if weight <= 0:
        return math.inf if drs > 0 else 0.0
    return drs * 1000.0 / weight


def weighted_share_milli(node: QuotaNode) -> int:
    """The weighted share as Kueue reports it in status (`weightedShare`, per mille; an
    infinite share is reported as the largest int64, as Kueue does)."""
    share = weighted_share(node)
    if math.isinf(share):
        return 2**63 - 1
    return round(share * 1000)


def share_with(
    tree: QuotaTree,
    node: QuotaNode,
    usage: Mapping[FlavorResource, int],
) -> float:
    """The node's weighted share if `usage` were added to it (the tree is left unchanged)."""
    tree.add_usage(node, usage)
    try:
        return weighted_share(node)
    finally:
        tree.remove_usage(node, usage)


def tournament_key(node: QuotaNode) -> tuple[tuple[float, str], ...]:
    """Sort key giving the fair-sharing order of cluster queues: lower shares first, compared
    at the lowest common cohort (see the module docstring). Ties go by name."""
    path: list[tuple[float, str]] = []
    n: QuotaNode | None = node
    while n is not None and n.parent is not None:
        path.append((weighted_share(n), n.name))
        n = n.parent
    path.reverse()
    return tuple(path)


def fair_level(cohort: QuotaNode, waiting: Container[int]) -> float:
    """The cohort's fair level (see the module docstring): the weighted share s at which the
    children's borrowing, summed as dominant resource shares, is shared again — every child
    whose id is in `waiting`, and every other child at or above s, holds s; the others keep
    their share; weight 0 holds nothing. Infinite when nothing bounds it (no child with a
    weight is waiting, or a share is infinite). The dominant shares add up exactly when one
    resource is contested; with several, the sum is the dominant-share approximation."""
    mass = 0.0
    weight_sum = 0.0
    content: list[tuple[float, float]] = []
    for child in cohort.children:
        drs = dominant_resource_share(child)
        if math.isinf(drs):
            return math.inf
        mass += drs
        if child.weight <= 0:
            continue  # its target is 0: what it borrows is the others' to share
        w = child.weight / 1000.0
        weight_sum += w
        if id(child) not in waiting:
            content.append((drs / w, w))
    if weight_sum <= 0:
        return math.inf
    level = mass / weight_sum
    content.sort()
    for share, w in content:
        if share >= level:
            break
        # Waiting for nothing, it keeps less than the level: the rest share what it leaves.
        mass -= share * w
        weight_sum -= w
        if weight_sum <= 1e-12:
            return math.inf
        level = mass / weight_sum
    return level
