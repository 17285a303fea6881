"""The options given to ``@tool(...)``, checked one by one.

Each check takes an option as given (any object: ``@tool`` does not trust its caller's
types), adds a problem for everything wrong with it, and returns the value the definition
uses, or a neutral one when the option is invalid so that checking can go on.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from typing import Final, Literal, cast

from tdk._define.definition import ApprovalRule, ToolAnnotations
from tdk._define.docstrings import Doc
from tdk._define.problems import ProblemKind, Problems, quote
from tdk._execution.seconds import finite
from tdk.auth._provider import AuthRequirement, OAuthProvider

#: The rule for tool names shared by OpenAI, Anthropic and MCP hosts.
TOOL_NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: An OAuth scope (RFC 6749, section 3.3: ``scope-token``): printable ASCII but the space,
#: ``"`` and ``\``; what a ``WWW-Authenticate: Bearer scope="..."`` challenge can carry.
SCOPE_PATTERN: Final = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]+")


def check_name(problems: Problems, given: object, function_name: str) -> str:
    """The tool's name: ``name=`` when it is a string, else the function's name."""
    name = given if isinstance(given, str) else function_name
    if given is not None and not isinstance(given, str):
        problems.add(
            ProblemKind.INVALID_NAME,
            None,
            f"name= must be a string, not {type(given).__name__}",
            "pass a name such as name='search_issues'",
        )
    elif TOOL_NAME_PATTERN.fullmatch(name) is None:
        source = "name=" if given is not None else "the function name"
        problems.add(
            ProblemKind.INVALID_NAME,
            None,
            f"tool name {quote(name)} ({source}) is not 1-64 letters, digits, '_' or '-'",
            "pass a valid name, e.g. @tool(name='search_issues')",
        )
    return name


def check_description(problems: Problems, given: object, doc: Doc) -> str:
    """The tool's description: ``description=``, else the docstring's."""
    if given is None:
        if doc.description:
            return doc.description
        problems.add(
            ProblemKind.MISSING_DESCRIPTION,
            None,
            "the tool has no description: no docstring and no description=",
            "add a docstring saying what the tool does, or pass description='...'",
        )
    elif not isinstance(given, str) or not given.strip():
        problems.add(
            ProblemKind.MISSING_DESCRIPTION,
            None,
            "description= must be a non-blank string",
            "say what the tool does, e.g. description='Search the issues of a repository'",
        )
    else:
        return inspect.cleandoc(given)
    return ""


def check_requirements(
    problems: Problems, given: object, option: str, what: str, example: str
) -> tuple[str, ...]:
    """The names listed by ``option=`` (``requires_secrets`` or ``requires_metadata``)."""
    if isinstance(given, str) or not isinstance(given, Iterable):
        problems.add(
            ProblemKind.INVALID_REQUIREMENT,
            None,
            f"{option}= must be a list of names, not {type(given).__name__}",
            f"write {option}=['{example}'] even for a single {what}",
        )
        return ()
    names: list[str] = []
    seen: dict[str, str] = {}
    for item in given:
        if not isinstance(item, str) or not item.strip():
            problems.add(
                ProblemKind.INVALID_REQUIREMENT,
                None,
                f"{option}= contains {quote(item)}, which is not a non-blank name",
                f"list each {what} by its name, e.g. {option}=['{example}']",
            )
            continue
        folded = item.casefold()
        if folded in seen:
            problems.add(
                ProblemKind.DUPLICATE_REQUIREMENT,
                None,
                f"{option}= names {quote(seen[folded])} and {quote(item)}, which are "
                "the same ignoring case",
                f"list each {what} once",
            )
            continue
        seen[folded] = item
        names.append(item)
    return tuple(names)


def check_scopes(problems: Problems, given: object) -> tuple[str, ...]:
    """The OAuth scopes listed by ``requires_scopes=``: each a scope token (RFC 6749), listed
    once (scopes are compared exactly: ``Repo`` and ``repo`` are two)."""
    hint = "list each scope the caller's token must hold, e.g. requires_scopes=['repo:write']"
    if isinstance(given, str) or not isinstance(given, Iterable):
        problems.add(
            ProblemKind.INVALID_SCOPE,
            None,
            f"requires_scopes= must be a list of scopes, not {type(given).__name__}",
            "write requires_scopes=['repo:write'] even for a single scope",
        )
        return ()
    scopes: dict[str, None] = {}
    for item in given:
        if not isinstance(item, str) or SCOPE_PATTERN.fullmatch(item) is None:
            problems.add(
                ProblemKind.INVALID_SCOPE,
                None,
                f"requires_scopes= contains {quote(item)}, which is not an OAuth scope "
                "(a non-empty string of printable ASCII without spaces, quotes or backslashes)",
                hint,
            )
        elif item in scopes:
            problems.add(
                ProblemKind.INVALID_SCOPE,
                None,
                f"requires_scopes= lists {quote(item)} twice",
                "list each scope once",
            )
        else:
            scopes[item] = None
    return tuple(scopes)


def check_auth(problems: Problems, given: object) -> AuthRequirement | None:
    """``requires_auth=``: None, an :class:`~tdk.auth.OAuthProvider` (no particular scope),
    or ``provider.with_scopes(...)`` whose scopes are OAuth scopes, each listed once."""
    if given is None:
        return None
    if type(given) is OAuthProvider:
        return AuthRequirement(given, ())
    if type(given) is not AuthRequirement or type(given.provider) is not OAuthProvider:
        problems.add(
            ProblemKind.INVALID_AUTH,
            None,
            f"requires_auth= must be an OAuthProvider or provider.with_scopes(...), not "
            f"{quote(given)}",
            "pass requires_auth=GITHUB or requires_auth=GITHUB.with_scopes('repo'), where "
            "GITHUB = tdk.auth.OAuthProvider(...)",
        )
        return None
    if type(given.scopes) is not tuple:  # (made by hand: a str would be one scope a letter)
        problems.add(
            ProblemKind.INVALID_AUTH,
            None,
            f"requires_auth= lists its scopes as {quote(given.scopes)}, not as a tuple of strings",
            "name the scopes with provider.with_scopes('repo', 'read:org')",
        )
        return None
    scopes: dict[str, None] = {}
    for item in given.scopes:
        if type(item) is not str or SCOPE_PATTERN.fullmatch(item) is None:
            problems.add(
                ProblemKind.INVALID_AUTH,
                None,
                f"requires_auth= asks for the scope {quote(item)}, which is not an OAuth scope "
                "(a non-empty string of printable ASCII without spaces, quotes or backslashes)",
                "list each scope as its own string: with_scopes('repo', 'read:org')",
            )
        elif item in scopes:
            problems.add(
                ProblemKind.INVALID_AUTH,
                None,
                f"requires_auth= asks for the scope {quote(item)} twice",
                "list each scope once",
            )
        else:
            scopes[item] = None
    return AuthRequirement(given.provider, tuple(scopes))


def check_timeout(problems: Problems, given: object) -> float | None:
    """The tool's time limit in seconds, None for no limit."""
    if given is None:
        return None
    seconds = finite(given)
    if seconds is None or seconds <= 0:
        problems.add(
            ProblemKind.INVALID_TIMEOUT,
            None,
            f"timeout= must be a positive number of seconds, not {quote(given)}",
            "pass e.g. timeout=30, or leave it out for no time limit",
        )
        return None
    return seconds


def check_deprecation(problems: Problems, given: object) -> str | None:
    """The deprecation message, None when the tool is not deprecated."""
    if given is None:
        return None
    if not isinstance(given, str) or not given.strip():
        problems.add(
            ProblemKind.INVALID_DEPRECATION,
            None,
            f"deprecated= must be a non-blank message, not {quote(given)}",
            "say what to use instead, e.g. deprecated='use search_issues instead'",
        )
        return None
    return given


def check_inline(problems: Problems, given: object, is_async: bool, timeout: object) -> bool:
    """Whether a sync tool runs on the event loop itself instead of in a worker thread."""
    if given is False:
        return False
    if given is not True:
        problem = f"inline= must be True or False, not {quote(given)}"
        hint = "pass inline=True for a trivial sync tool, or leave it out"
    elif is_async:
        problem = "inline=True applies to sync tools only; an async tool already runs on the loop"
        hint = "remove inline=True"
    elif timeout is not None:
        problem = (
            "inline=True and timeout= cannot be combined: an inline call blocks the event loop, "
            "so no time limit can interrupt it"
        )
        hint = "drop inline=True to run the tool in a worker thread, or drop timeout="
    else:
        return True
    problems.add(ProblemKind.INVALID_INLINE, None, problem, hint)
    return False


#: The marks ``@tool`` takes, with their defaults (MCP's): None means "follow ``read_only``".
MARKS: Final = ("read_only", "idempotent", "destructive", "open_world")


def check_marks(problems: Problems, given: dict[str, object]) -> ToolAnnotations:
    """The tool's side-effect marks: each a bool or None (not given); ``read_only=True``
    makes the tool idempotent and not destructive, and contradicting either is a problem."""
    marks: dict[str, bool | None] = {}
    for name in MARKS:
        value = given[name]
        if value is not None and not isinstance(value, bool):
            problems.add(
                ProblemKind.INVALID_MARK,
                None,
                f"{name}= must be True or False, not {quote(value)}",
                f"pass {name}=True or {name}=False, or leave it out",
            )
            value = None
        marks[name] = value
    read_only = bool(marks["read_only"])
    idempotent, destructive = marks["idempotent"], marks["destructive"]
    if read_only and (idempotent is False or destructive is True):
        contradicting = [
            ("idempotent=False", idempotent is False),
            ("destructive=True", destructive),
        ]
        said = " and ".join(text for text, given in contradicting if given)
        problems.add(
            ProblemKind.CONTRADICTING_MARKS,
            None,
            f"read_only=True contradicts {said}: a tool that only reads is idempotent and "
            "destroys nothing",
            f"drop {said}, or read_only=True if the tool changes anything",
        )
        idempotent = destructive = None
    return ToolAnnotations(
        read_only=read_only,
        idempotent=read_only if idempotent is None else idempotent,
        destructive=not read_only if destructive is None else destructive,
        open_world=True if marks["open_world"] is None else marks["open_world"],
    )


def check_approval_option(problems: Problems, given: object) -> ApprovalRule | Literal[True] | None:
    """``requires_approval=``: True, None for False, or a plain function taking the
    arguments and the context (a coroutine function cannot be asked before the body)."""
    if given is True:
        return True
    if given is False or given is None:
        return None
    problem = None
    if not callable(given) or isinstance(given, type):
        problem = f"requires_approval= must be True, False or a function, not {quote(given)}"
    elif inspect.iscoroutinefunction(given) or inspect.iscoroutinefunction(
        getattr(given, "__call__", None)  # noqa: B004 (an object whose __call__ is async)
    ):
        problem = "requires_approval= must be a plain function: it is asked before the body runs"
    else:
        try:
            inspect.signature(given).bind(None, None)
        except TypeError:
            problem = "requires_approval= must take two arguments: the arguments and the context"
        except ValueError:  # (a builtin without a signature: trusted)
            pass
    if problem is None:
        return cast(ApprovalRule, given)
    problems.add(
        ProblemKind.INVALID_APPROVAL,
        None,
        problem,
        "pass requires_approval=True, or a function such as "
        "lambda arguments, context: arguments['amount'] > 100",
    )
    return None
