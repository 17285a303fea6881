"""The public surface: one import path per name, a sorted __all__, a docstring on each."""

from __future__ import annotations

import importlib

import pytest

import tdk
import tdk.errors

PUBLIC_MODULES = ["tdk", "tdk.errors"]


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_is_sorted_and_resolvable(module_name: str) -> None:
    """__all__ is sorted, free of duplicates, and every name in it exists."""
    module = importlib.import_module(module_name)
    names = list(module.__all__)
    assert names == sorted(names)
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(module, name), name


@pytest.mark.parametrize("name", sorted(set(tdk.errors.__all__)))
def test_error_names_are_importable_from_tdk(name: str) -> None:
    """Every public error name is the same object from tdk and from tdk.errors."""
    assert getattr(tdk, name) is getattr(tdk.errors, name)


@pytest.mark.parametrize("name", [n for n in tdk.__all__ if not n.startswith("_")])
def test_every_public_name_has_a_docstring(name: str) -> None:
    """Public classes and functions document themselves."""
    obj = getattr(tdk, name)
    assert (obj.__doc__ or "").strip(), name


def test_version_is_a_string() -> None:
    """tdk.__version__ is the package version."""
    assert isinstance(tdk.__version__, str)
    assert tdk.__version__[0].isdigit()
