import pytest

from tests.reports import scenario


@pytest.fixture
def dashboard_cases(analyst, analyst_b):
    return scenario.build(analyst=analyst, analyst_b=analyst_b)
