"""qctl's own light tables agree with the api package, and its config file reads back what
it writes, refusing what it does not know, without a model library."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from api.kinds import ALL_KINDS
from api.meta import API_VERSION
from api.v1alpha1.workload import Workload
from qctl import config
from qctl.errors import HubRequestError, InputError, UsageError
from qctl.kinds import API_PREFIX, SERVED_KINDS, resolve_kind, resource_path


class TestKinds:
    def test_the_served_kinds_are_the_api_kinds_under_multiq_dev(self) -> None:
        served = [
            (k.KIND, k.plural(), k.NAMESPACED, k.SHORT_NAMES)
            for k in ALL_KINDS
            if k.API_VERSION.startswith("multiq.dev/")
        ]
        assert [(k.KIND, k.plural(), k.NAMESPACED, k.SHORT_NAMES) for k in SERVED_KINDS] == served
        assert f"/apis/{API_VERSION}" == API_PREFIX

    @pytest.mark.parametrize(
        ("word", "kind"),
        [
            ("workloads", "Workload"),
            ("wl", "Workload"),
            ("workload", "Workload"),
            ("clusters", "MemberCluster"),
            ("queues", "GlobalQueue"),
            ("cq", "ClusterQueue"),
            ("lq", "LocalQueue"),
            ("topologies", "Topology"),
            ("ClusterSet", "ClusterSet"),
        ],
    )
    def test_the_words_users_type_name_kinds(self, word: str, kind: str) -> None:
        assert kind == resolve_kind(word).KIND

    def test_an_unknown_word_lists_the_known_ones(self) -> None:
        with pytest.raises(UsageError, match=r'no resource type "pods"; known: .*workloads'):
            resolve_kind("pods")

    def test_a_served_kind_and_its_model_have_the_same_path(self) -> None:
        assert resource_path(resolve_kind("wl"), "team", "a") == resource_path(
            Workload, "team", "a"
        )
        assert resource_path(resolve_kind("wl"), "team", "a") == (
            "/apis/multiq.dev/v1alpha1/namespaces/team/workloads/a"
        )


class TestConfigFile:
    def test_what_is_saved_loads_back(self, tmp_path: Path) -> None:
        path = tmp_path / "config.yaml"
        saved = config.ConfigFile()
        saved.upsert(config.Context(name="dev", server="http://a:1,http://b:2", token="t"))
        config.save(saved, path)
        assert config.load(path) == saved
        assert path.stat().st_mode & 0o777 == 0o600

    def test_it_is_written_as_json_and_a_yaml_file_still_loads(self, tmp_path: Path) -> None:
        path = tmp_path / "config.yaml"
        saved = config.ConfigFile()
        saved.upsert(config.Context(name="dev", server="http://a:1", token="t", namespace="ml"))
        config.save(saved, path)
        assert json.loads(path.read_text()) == saved.to_file()
        assert yaml.safe_load(path.read_text()) == saved.to_file()
        path.write_text(yaml.safe_dump(saved.to_file()))
        assert config.load(path) == saved

    def test_a_missing_file_is_no_contexts(self, tmp_path: Path) -> None:
        assert config.load(tmp_path / "nowhere.yaml") == config.ConfigFile()

    def test_a_list_of_servers_is_joined(self, tmp_path: Path) -> None:
        path = tmp_path / "config.yaml"
        path.write_text("contexts:\n- name: ha\n  server: [http://a:1, http://b:2]\n")
        (context,) = config.load(path).contexts
        assert context.server == "http://a:1,http://b:2"
        assert context.namespace == "default"

    @pytest.mark.parametrize(
        ("text", "problem"),
        [
            (
                "contexts:\n- name: x\n  server: http://a\n  colour: red\n",
                "contexts[0]: unknown field(s) colour",
            ),
            ("contexts:\n- name: x\n", "contexts[0]: missing field(s) server"),
            ("contexts: {}\n", "contexts: must be a list"),
            ("currentContext: [a]\n", "currentContext: must be a string"),
            ("contexts: [\n", "while parsing a flow node"),
        ],
    )
    def test_a_broken_file_is_named_with_what_is_wrong(
        self, tmp_path: Path, text: str, problem: str
    ) -> None:
        path = tmp_path / "config.yaml"
        path.write_text(text)
        with pytest.raises(InputError, match="not a valid qctl config") as raised:
            config.load(path)
        assert str(raised.value).startswith(f"{path}: ")
        assert problem in str(raised.value)


class TestHubErrors:
    def test_a_status_reply_becomes_its_message_and_one_line_per_cause(self) -> None:
        body = (
            '{"kind": "Status", "reason": "Invalid", "message": "Workload \\"a\\" is invalid",'
            ' "details": {"causes": [{"message": "spec.x: Required value"}, {"field": "y"}]}}'
        )
        error = HubRequestError.from_reply(422, "Unprocessable Entity", body)
        assert (error.status, error.reason) == (422, "Invalid")
        assert str(error) == (
            "Workload \"a\" is invalid\n  spec.x: Required value\n  {'field': 'y'}"
        )

    def test_a_reply_that_is_not_a_status_keeps_its_text(self) -> None:
        error = HubRequestError.from_reply(502, "Bad Gateway", "upstream gone\n")
        assert (str(error), error.reason) == ("upstream gone", "")
        assert str(HubRequestError.from_reply(503, "Service Unavailable", "")) == (
            "Service Unavailable"
        )


class TestTheTraceparentQctlSends:
    def test_an_inherited_traceparent_is_sent_as_it_is(self) -> None:
        from qctl.rest import command_traceparent

        inherited = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        assert command_traceparent(inherited) == inherited

    def test_without_one_or_with_a_malformed_one_a_new_trace_begins(self) -> None:
        from api.tracecontext import parse
        from qctl.rest import command_traceparent

        first, second = command_traceparent(None), command_traceparent("00-junk")
        assert parse(first) is not None
        assert parse(second) is not None
        assert first != second
