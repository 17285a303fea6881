"""The definition phase: a function and the options of ``@tool`` -> its checked definition.

Runs once per tool, when ``@tool`` decorates a function (:mod:`tdk._define.tool` is its one
caller):
:func:`define_tool` (in :mod:`~tdk._define.build`) checks the target, the options
(:mod:`~tdk._define.options`), the docstring (:mod:`~tdk._define.docstrings`), the parameters
(:mod:`~tdk._define.signature`) and the return type (:mod:`~tdk._define.schema`), collecting
every problem (:mod:`~tdk._define.problems`) and raising them all at once.

What the phase produces and who uses it: :mod:`~tdk._define.definition` holds the records
(``ToolDefinition`` for hosts, ``ToolSpec`` for execution); :mod:`~tdk._define.tool` is
``@tool`` and ``Tool``, and :mod:`~tdk._define.toolkit` is ``Toolkit``, a named set of them.
"""

from tdk._define.build import ToolOptions, define_tool, function_of

__all__ = ["ToolOptions", "define_tool", "function_of"]
