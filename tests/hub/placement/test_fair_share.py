"""Fleet fair share: usage decays by its half-life, accrues per billing unit, and Slurm's Fair
Tree turns tenants' shares and usage into a factor per user — the same order real Slurm 22.05
gave in the reference setting (slurm.md, "Fair share on that Slurm")."""

from __future__ import annotations

import math

import pytest

from api.v1alpha1.federation import GlobalQueue, Tenant
from api.v1alpha1.queues import LocalQueue
from hub.placement.fairshare import (
    Association,
    accrue,
    billing,
    decay,
    fair_tree,
    tenant_default_queue,
)
from hub.placement.routing import Routing

ALICE = Association("proja", "alice")
PROJA_ROOT = Association("proja", "root")
BOB = Association("projb", "bob")
CAROL = Association("projb", "carol")
ROOT = Association("root", "root")


class TestUsage:
    def test_usage_halves_every_half_life(self) -> None:
        assert decay({ALICE: 100.0}, 3600, 3600) == {ALICE: 50.0}
        assert decay({ALICE: 100.0}, 7200, 3600)[ALICE] == pytest.approx(25.0)

    def test_a_half_life_of_zero_means_no_decay(self) -> None:
        assert decay({ALICE: 100.0}, 10**6, 0) == {ALICE: 100.0}

    def test_running_work_accrues_its_billing_rate_times_the_time(self) -> None:
        rate = billing({"cpu": 2000, "memory": 4 * 2**30 * 1000}, {"cpu": 1.0})
        assert rate == 2.0
        grown = accrue({ALICE: 10.0}, [(ALICE, rate), (BOB, 0.5)], 30)
        assert grown == {ALICE: 70.0, BOB: 15.0}

    def test_gpus_bill_only_when_weighted(self) -> None:
        requests = {"cpu": 8000, "nvidia.com/gpu": 2000}
        assert billing(requests, {"cpu": 1.0}) == 8.0
        assert billing(requests, {"cpu": 1.0, "nvidia.com/gpu": 16.0}) == 40.0


class TestFairTree:
    def test_the_reference_setting_orders_users_as_real_slurm_did(self) -> None:
        # proja (70 shares: alice, root) and projb (30: bob, carol), and the root account's
        # own user (1 share) whose 2-CPU blocker ran for 30 s. alice ran 6 jobs of 30 s, bob 1.
        tree = fair_tree(
            {"proja": 70, "projb": 30, "root": 1},
            {"proja": ["alice", "root"], "projb": ["bob", "carol"], "root": ["root"]},
            {ALICE: 180.0, BOB: 30.0, ROOT: 60.0},
        )
        # sprio: carol 100000 > bob 80000 > alice 40000 at PriorityWeightFairshare=100000.
        assert tree.factor(CAROL) == 1.0
        assert tree.factor(BOB) == 0.8
        assert tree.factor(ALICE) == 0.4
        assert tree.factor(PROJA_ROOT) == 0.6
        assert tree.factor(ROOT) == pytest.approx(0.2)
        assert [t.name for t in tree.tenants] == ["projb", "proja", "root"]

    def test_norm_shares_and_level_fs_are_sshares_columns(self) -> None:
        tree = fair_tree(
            {"proja": 70, "projb": 30, "root": 1},
            {"proja": ["alice"], "projb": ["bob", "carol"]},
            {ALICE: 209.0, BOB: 59.0, CAROL: 29.0},
        )
        rows = {t.name: t for t in tree.tenants}
        assert rows["proja"].norm_shares == pytest.approx(0.693, abs=1e-3)
        assert rows["projb"].norm_shares == pytest.approx(0.297, abs=1e-3)
        assert rows["root"].level_fs == 0.0 or math.isinf(rows["root"].level_fs)
        bob, carol = (r for r in sorted(tree.users[("projb", "")], key=lambda r: r.name))
        assert bob.effective_usage == pytest.approx(59 / 88)
        assert carol.level_fs == pytest.approx(0.5 / (29 / 88))
        assert carol.factor is not None and bob.factor is not None and carol.factor > bob.factor

    def test_a_tenant_that_used_less_than_its_share_goes_first_whatever_its_users_did(
        self,
    ) -> None:
        # 70/30, the heavy tenant used 80% of the fleet: over its share, so the light one's
        # heaviest user still goes before the heavy one's lightest.
        heavy_light, heavy_heavy = Association("heavy", "a"), Association("heavy", "b")
        light_heavy = Association("light", "c")
        tree = fair_tree(
            {"heavy": 70, "light": 30},
            {"heavy": ["a", "b"], "light": ["c"]},
            {heavy_light: 10.0, heavy_heavy: 790.0, light_heavy: 200.0},
        )
        assert tree.factor(light_heavy) > tree.factor(heavy_light) > tree.factor(heavy_heavy)

    def test_the_order_flips_once_the_light_tenant_is_over_its_share(self) -> None:
        a, b = Association("seventy", "a"), Association("thirty", "b")
        shares = {"seventy": 70, "thirty": 30}
        users = {"seventy": ["a"], "thirty": ["b"]}
        assert fair_tree(shares, users, {a: 65.0, b: 35.0}).factor(a) == 1.0
        assert fair_tree(shares, users, {a: 75.0, b: 25.0}).factor(b) == 1.0

    def test_users_with_the_same_level_share_a_rank(self) -> None:
        tree = fair_tree({"t": 1}, {"t": ["a", "b", "c"]}, {Association("t", "c"): 5.0})
        assert tree.factor(Association("t", "a")) == tree.factor(Association("t", "b")) == 1.0
        assert tree.factor(Association("t", "c")) == pytest.approx(1 / 3)

    def test_a_tenant_with_zero_shares_comes_last(self) -> None:
        tree = fair_tree({"zero": 0, "one": 1}, {"zero": ["z"], "one": ["o"]}, {})
        assert tree.factor(Association("one", "o")) == 1.0
        assert tree.factor(Association("zero", "z")) == 0.5

    def test_usage_of_an_unknown_tenant_still_gets_a_factor(self) -> None:
        stranger = Association("", "someone")
        tree = fair_tree({"t": 1}, {"t": ["a"]}, {stranger: 10.0})
        assert tree.factor(stranger) == 0.5
        assert tree.factor(Association("t", "a")) == 1.0

    def test_an_association_never_seen_has_the_highest_factor(self) -> None:
        tree = fair_tree({"t": 1}, {"t": ["a"]}, {Association("t", "a"): 1.0})
        assert tree.factor(Association("t", "new")) == 1.0


class TestGlobalQueueLevel:
    """Tenant → the GlobalQueues its work goes through (shares: their fairSharingWeight) →
    users, as Slurm nests sub-accounts in an account."""

    def test_one_queue_per_tenant_gives_the_reference_settings_factors_unchanged(self) -> None:
        # The reference setting again, every tenant's work through one weighted queue.
        def via(a: Association, queue: str) -> Association:
            return Association(a.tenant, a.user, queue)

        queue = {"proja": "gpu", "projb": "cpu", "root": "ops"}
        tree = fair_tree(
            {"proja": 70, "projb": 30, "root": 1},
            {"proja": ["alice", "root"], "projb": ["bob", "carol"], "root": ["root"]},
            {via(ALICE, "gpu"): 180.0, via(BOB, "cpu"): 30.0, via(ROOT, "ops"): 60.0},
            queue_shares={"gpu": 5, "cpu": 2, "ops": 1},
            default_queue=queue,
        )
        assert tree.factor(via(CAROL, "cpu")) == 1.0
        assert tree.factor(via(BOB, "cpu")) == 0.8
        assert tree.factor(via(PROJA_ROOT, "gpu")) == 0.6
        assert tree.factor(via(ALICE, "gpu")) == 0.4
        assert tree.factor(via(ROOT, "ops")) == pytest.approx(0.2)
        assert [q.norm_shares for q in tree.queues["proja"]] == [1.0]

    def test_the_queue_used_least_against_its_weight_goes_first(self) -> None:
        # One tenant, queues weighted 3:1. "big" used 600, "small" 400: big has 75% of the
        # shares and 60% of the usage (LevelFS 1.25), small 25% and 40% (0.625).
        big, small = Association("t", "u", "big"), Association("t", "u", "small")
        tree = fair_tree(
            {"t": 1}, {}, {big: 600.0, small: 400.0}, queue_shares={"big": 3, "small": 1}
        )
        assert tree.factor(big) > tree.factor(small)
        assert [q.name for q in tree.queues["t"]] == ["big", "small"]
        assert tree.queues["t"][0].level_fs == pytest.approx(1.25)
        # Weights ignored (one share each), the same usage puts small first.
        even = fair_tree({"t": 1}, {}, {big: 600.0, small: 400.0})
        assert even.factor(small) > even.factor(big)

    def test_a_queue_weighted_zero_comes_last_in_its_tenant(self) -> None:
        used, unused = Association("t", "a", "zero"), Association("t", "b", "one")
        tree = fair_tree(
            {"t": 1}, {}, {used: 0.0}, queue_shares={"zero": 0, "one": 1}, waiting=[unused]
        )
        assert tree.queues["t"][-1].name == "zero"
        assert tree.queues["t"][-1].level_fs == 0.0
        assert tree.factor(unused) == 1.0 and tree.factor(used) == 0.5

    def test_the_same_user_in_two_queues_has_a_factor_in_each(self) -> None:
        in_a, in_b = Association("t", "u", "a"), Association("t", "u", "b")
        tree = fair_tree({"t": 1}, {"t": ["u"]}, {in_a: 10.0}, waiting=[in_b])
        assert tree.factor(in_b) == 1.0
        assert tree.factor(in_a) == 0.5

    def test_a_listed_user_with_no_work_sits_in_the_tenants_default_queue(self) -> None:
        tree = fair_tree({"t": 1}, {"t": ["idle"]}, {}, default_queue={"t": "main"})
        assert [q.name for q in tree.queues["t"]] == ["main"]
        assert tree.factor(Association("t", "idle", "main")) == 1.0


def _tenant(name: str, *namespaces: str) -> Tenant:
    return Tenant.model_validate(
        {"metadata": {"name": name}, "spec": {"namespaces": list(namespaces)}}
    )


def _queue(name: str, **spec: object) -> GlobalQueue:
    return GlobalQueue.model_validate(
        {"metadata": {"name": name}, "spec": {"clusterSet": "all", **spec}}
    )


def _local(namespace: str, cluster_queue: str) -> LocalQueue:
    return LocalQueue.model_validate(
        {
            "metadata": {"name": "q", "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue},
        }
    )


class TestDefaultQueue:
    def _routing(self, *queues: GlobalQueue, locals_: tuple[LocalQueue, ...] = ()) -> Routing:
        return Routing.of(
            local_queues=locals_, global_queues=queues, tenants=(), cluster_sets=(), members=()
        )

    def test_it_is_the_queue_the_tenants_local_queues_are_routed_by(self) -> None:
        routing = self._routing(
            _queue("a-first", clusterQueues=["other"]),
            _queue("b-mine", clusterQueues=["team"]),
            locals_=(_local("vision", "team"),),
        )
        assert tenant_default_queue(_tenant("vision", "vision"), routing) == "b-mine"

    def test_without_local_queues_it_is_the_first_queue_open_to_the_tenant(self) -> None:
        routing = self._routing(_queue("a", tenants=["someone-else"]), _queue("b"))
        assert tenant_default_queue(_tenant("vision", "vision"), routing) == "b"

    def test_with_no_global_queue_it_is_no_queue(self) -> None:
        assert tenant_default_queue(_tenant("vision", "vision"), self._routing()) == ""
