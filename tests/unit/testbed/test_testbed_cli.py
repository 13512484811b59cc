"""`stallscope testbed` passes its shaping options to the test bed (runs everywhere: the test bed
itself is replaced by a recorder that refuses to come up)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

import stallscope.testbed
from stallscope.cli.main import cli
from stallscope.testbed import TestbedError


class _Recorder:
    seen: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _Recorder.seen.append(kwargs)

    def __enter__(self) -> _Recorder:
        raise TestbedError("recorder: not brought up")

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize(
    ("flags", "ack", "rt"), [([], True, False), (["--no-ack-priority", "--realtime"], False, True)]
)
def test_cli_shaping_options_reach_the_test_bed(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], ack: bool, rt: bool
) -> None:
    _Recorder.seen.clear()
    monkeypatch.setattr(stallscope.testbed, "Testbed", _Recorder)
    res = CliRunner().invoke(cli, ["testbed", "--rate", "50mbit", *flags, "--", "true"])
    assert res.exit_code == 1 and "recorder: not brought up" in res.output, res.output
    assert _Recorder.seen == [
        {"subnet": "198.18.0.0/24", "mtu": 1500, "master_port": 29500, "burst": None,
         "realtime": rt, "ack_priority": ack},
    ]  # fmt: skip
