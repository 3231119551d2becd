"""runtime/cpu_tune.py's choice among equivalent forms: the fastest of those that allocate nothing where one runs,
else the fastest; remembered per process and on disk under a key naming the candidates and the rule; NETC_CPU_TUNE
forcing a form or turning the timing off. The forms here are functions whose costs differ by a sleep, so the order
is not a matter of measurement noise (2 ms against none)."""
from __future__ import annotations

import json
import time

import pytest

from netc.runtime import cpu_tune as T


def slow():
    time.sleep(0.002)


def fast():
    pass


def refuses():
    raise RuntimeError("this form does not take the shape")


@pytest.fixture
def tuning(monkeypatch, tmp_path):
    monkeypatch.setenv("NETC_CPU_TUNE", "1")
    monkeypatch.setenv("NETC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(T, "_MEMO", {})
    return tmp_path


def test_the_fastest_form_wins(tuning):
    assert T.fastest("k1", {"a": slow, "b": fast}) == "b"
    assert T.fastest("k2", {"a": fast, "b": slow}) == "a"


def test_a_form_that_allocates_nothing_wins_over_a_faster_one(tuning):
    assert T.fastest("k3", {"copy": fast, "into": slow}, allocation_free=("into",)) == "into"
    # among several that allocate nothing, the fastest
    assert T.fastest("k4", {"copy": fast, "x": slow, "y": fast}, allocation_free=("x", "y")) == "y"
    # none that allocates nothing runs on the shape: the fastest of the others
    assert T.fastest("k5", {"a": slow, "b": fast, "into": refuses}, allocation_free=("into",)) == "b"


def test_a_choice_is_remembered_under_its_candidates_and_rule(tuning):
    assert T.fastest("k6", {"a": slow, "b": fast}) == "b"
    (key, choice), = json.loads((tuning / "cpu-tuning.json").read_text()).items()
    assert choice == "b" and key.startswith("k6 | a b | ") and f"rule {T.RULE}," in key
    # the same key again: remembered, not timed (the forms now cost the other way round)
    T._MEMO.clear()
    assert T.fastest("k6", {"a": fast, "b": slow}) == "b"
    # other candidates: another key, timed again
    assert T.fastest("k6", {"a": fast, "b": slow, "c": slow}) == "a"


def test_no_timing_takes_the_first_that_allocates_nothing(monkeypatch):
    monkeypatch.setenv("NETC_CPU_TUNE", "0")
    assert T.fastest("k7", {"cl": fast, "into": slow}, allocation_free=("into",)) == "into"
    assert T.fastest("k8", {"cl": slow, "nchw": fast}) == "cl"
    assert T.fastest("k9", {"cl": refuses, "nchw": fast}) == "nchw"
    monkeypatch.setenv("NETC_CPU_TUNE", "nchw")
    assert T.fastest("k10", {"cl": fast, "nchw": slow, "into": fast}, allocation_free=("into",)) == "nchw"
