"""Shared pytest setup: the `--update-goldens` option (used by `make golden`)."""
from __future__ import annotations

import pytest


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite the expected outputs under tests/golden/ instead of comparing")


@pytest.fixture
def update_goldens(request) -> bool:
    return request.config.getoption("--update-goldens")
