"""The variables a training script reads under `stallscope analyze`, and their errors."""

from __future__ import annotations

import os

import pytest

import stallscope.data as sd
from stallscope.data._env import declared_dataset, step_budget
from stallscope.exceptions import DataError, StallscopeError


def test_modes_default_and_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    for v in (sd.DATA_ENV, sd.CACHE_ENV, sd.STEPS_ENV, sd.DATASET_ENV):
        monkeypatch.delenv(v, raising=False)
    assert (sd.data_mode(), sd.cache_mode(), step_budget(), declared_dataset()) == (
        "real",
        None,
        None,
        [],
    )
    monkeypatch.setenv(sd.DATA_ENV, " Synthetic ")
    monkeypatch.setenv(sd.CACHE_ENV, "cold")
    monkeypatch.setenv(sd.STEPS_ENV, "12")
    monkeypatch.setenv(sd.DATASET_ENV, os.pathsep.join(["/a", "", "/b/c"]))
    assert sd.data_mode() == "synthetic" and sd.cache_mode() == "cold" and step_budget() == 12
    assert [str(p) for p in declared_dataset()] == ["/a", "/b/c"]


@pytest.mark.parametrize(
    ("var", "value", "call", "match"),
    [
        (sd.DATA_ENV, "fake", sd.data_mode, "STALLSCOPE_DATA='fake' .*synthetic, real"),
        (sd.CACHE_ENV, "hot", sd.cache_mode, "STALLSCOPE_CACHE='hot' .*cached, cold"),
        (sd.STEPS_ENV, "0", step_budget, "STALLSCOPE_STEPS='0' must be a whole number"),
        (sd.STEPS_ENV, "ten", step_budget, "STALLSCOPE_STEPS='ten'"),
    ],
)
def test_bad_values_name_the_variable_and_the_choices(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, call: object, match: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(DataError, match=match) as e:
        call()  # type: ignore[operator]
    assert isinstance(e.value, StallscopeError)
