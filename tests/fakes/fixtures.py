"""Pytest fixtures for the fakes. Import them into a test module:

    from tests.fakes.fixtures import fake_openai  # noqa: F401
"""

import pytest

from tests.fakes.openai_server import FakeOpenAIServer


@pytest.fixture
def fake_openai():
    """A started FakeOpenAIServer on 127.0.0.1 (ephemeral port), stopped after the test."""
    with FakeOpenAIServer() as server:
        yield server
