"""The suite's own rules (tests/conftest.py): one Hypothesis profile, derandomised in CI, and
one registered layer marker on every test."""

import os
import re
from pathlib import Path

import pytest
from conftest import LAYER_MARKERS, layer
from hypothesis import settings

TESTS = Path(__file__).parent


def test_only_the_conftest_sets_a_hypothesis_profile():
    """A module that loads its own profile overrides the CI one for every test run after it."""
    for f in TESTS.glob("test_*.py"):
        assert not re.search(r"\b(load|register)_profile\(", f.read_text()), f


@pytest.mark.skipif(not os.environ.get("CI"), reason="CI only: derandomised there")
def test_hypothesis_is_derandomised_in_ci():
    assert settings.default.derandomize and settings.default.database is None


def test_every_test_has_one_registered_layer(request, pytestconfig):
    registered = {m.split(":")[0] for m in pytestconfig.getini("markers")}
    assert set(LAYER_MARKERS) | {"slow"} <= registered
    for item in request.session.items:
        assert [m for m in LAYER_MARKERS if item.get_closest_marker(m)] == [layer(item)], item.nodeid
