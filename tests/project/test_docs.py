"""Every ```python block in docs/ and the README runs.

Blocks of one page share a namespace and run in order.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize("page", DOCS, ids=[page.name for page in DOCS])
def test_python_blocks_run(page: Path) -> None:
    """The page's examples run as written; their asserts are the expected results."""
    blocks = BLOCK.findall(page.read_text())
    # A real module, as the reader's script would be (pydantic resolves names through it).
    module = types.ModuleType(f"docs_{page.stem.replace('-', '_')}")
    sys.modules[module.__name__] = module
    try:
        for number, block in enumerate(blocks, start=1):
            code = compile(block, f"{page.name}[block {number}]", "exec")
            exec(code, module.__dict__)
    finally:
        del sys.modules[module.__name__]
