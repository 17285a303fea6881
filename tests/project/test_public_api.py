"""The public surface: one import path per name, a sorted __all__, a docstring on each."""

from __future__ import annotations

import importlib
import inspect

import pytest

import tdk
import tdk.errors


def _isort_key(name: str) -> tuple[int, str]:
    if name.isupper():
        return 0, name
    return (1 if name[0].isupper() else 2), name


PUBLIC_MODULES = ["tdk", "tdk.errors", "tdk.http", "tdk.runner"]


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_is_sorted_and_resolvable(module_name: str) -> None:
    """__all__ is sorted (constants, then classes, then functions, each alphabetically, as
    ruff's RUF022 keeps it), free of duplicates, and every name in it exists."""
    module = importlib.import_module(module_name)
    names = list(module.__all__)
    assert names == sorted(names, key=_isort_key)
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(module, name), name


@pytest.mark.parametrize("name", sorted(set(tdk.errors.__all__)))
def test_error_names_are_importable_from_tdk(name: str) -> None:
    """Every public error name is the same object from tdk and from tdk.errors."""
    assert getattr(tdk, name) is getattr(tdk.errors, name)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_has_a_docstring(module_name: str) -> None:
    """Public classes and functions document themselves."""
    module = importlib.import_module(module_name)
    undocumented = [
        name
        for name in module.__all__
        if (isinstance(obj := getattr(module, name), type) or inspect.isfunction(obj))
        and not (obj.__doc__ or "").strip()
    ]
    assert undocumented == []


def test_version_is_a_string() -> None:
    """tdk.__version__ is the package version."""
    assert isinstance(tdk.__version__, str)
    assert tdk.__version__[0].isdigit()


def test_runner_names_load_on_first_use() -> None:
    """The runner's names come from tdk.runner, imported when first asked for."""
    import tdk.runner

    for name in (
        "Bulkhead",
        "CircuitBreaker",
        "RateLimit",
        "RetryPolicy",
        "ToolCall",
        "ToolRunner",
    ):
        assert getattr(tdk, name) is getattr(tdk.runner, name)
        assert name in dir(tdk)


def test_unknown_attribute_is_an_attribute_error() -> None:
    """A name tdk does not have raises AttributeError, as for any module."""
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        tdk.missing  # noqa: B018


@tdk.tool(timeout=0.05)
async def _sleeps(seconds: float) -> str:
    """Sleep.

    Args:
        seconds: how long
    """
    import asyncio

    await asyncio.sleep(seconds)
    return "woke"


@pytest.mark.parametrize(
    ("timeout", "expected"),
    [
        pytest.param(tdk.DEFAULT, "TOOL_RUNTIME_TIMEOUT", id="default-is-the-tools-own-limit"),
        pytest.param(None, None, id="none-is-no-limit"),
        pytest.param(1.0, None, id="seconds-override"),
    ],
)
def test_default_means_the_tools_own_time_limit(timeout: object, expected: str | None) -> None:
    result = _sleeps.run_sync({"seconds": 0.2}, timeout=timeout)  # type: ignore[arg-type]
    assert (result.error.kind if result.error else None) == expected


def test_default_in_configure_inherits() -> None:
    """``configure(x=DEFAULT)`` is the same as leaving ``x`` out: the setting is inherited;
    None turns it off."""
    runner = tdk.ToolRunner(tdk.Toolkit("t", [_sleeps]), timeout=3.0, deadline=9.0)
    runner.configure("_sleeps", timeout=tdk.DEFAULT, deadline=None)
    policies = runner.policies("_sleeps")
    assert (policies.timeout, policies.deadline) == (3.0, None)


def test_default_is_one_value_with_a_plain_repr() -> None:
    assert tdk.DEFAULT is tdk.Default.DEFAULT
    assert repr(tdk.DEFAULT) == "tdk.DEFAULT"
    assert list(tdk.Default) == [tdk.DEFAULT]
