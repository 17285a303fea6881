"""The entry point of tdk's pytest plugin (group ``pytest11``, name ``tdk``: ``pytest -p
no:tdk`` turns it off).

pytest imports every ``pytest11`` module when it starts, before any other plugin has run: a
module inside the ``tdk`` package would import ``tdk`` then, before coverage tools start,
so that the package's own import could never be measured, in tdk's suite or in a user's. This
module imports nothing of tdk: it adds the plugin's option, and loads the plugin itself,
:mod:`tdk.testing.plugin` (the fixtures and hooks), when pytest is configured.
"""

from __future__ import annotations

import pytest

__all__ = ["pytest_addoption", "pytest_configure"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--tdk-update-snapshots``."""
    parser.getgroup("tdk", "tdk testing kit").addoption(
        "--tdk-update-snapshots",
        action="store_true",
        default=False,
        help="write the contract snapshots that tdk_snapshot compares with (accepting every "
        "change, breaking ones included)",
    )


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Load the fixtures and hooks of :mod:`tdk.testing.plugin`."""
    config.pluginmanager.import_plugin("tdk.testing.plugin")
