"""The error pipeline: any exception, or any text, -> the :class:`~tdk.errors.ErrorInfo` a
result carries, cleaned and redacted on the way.

A failure goes exception -> the row of the mapping table for its class -> its fields, read
and redacted -> ``ErrorInfo``. The modules, and what each uses (dotted: loaded on first need)::

    link ──> info ──> table ──> mapped ──> tdk.errors
     │        │         ╎ (first httpx exception)
     │        │         └╴╴> httpx_rows ──> tdk.http (its classifier)
     │        ├──> foreign ╴╴> tdk.http (a request's credentials, when one is met)
     │        └──> details
     └──> log_line ──> hidden

- :mod:`~tdk._failures.table`: the one mapping table of ``docs/errors.md``; foreign
  exceptions are looked up along their MRO, most specific class first. Its rows give a
  :class:`~tdk._failures.mapped.Mapped`, the error before it is made. The httpx rows
  (:mod:`~tdk._failures.httpx_rows`) are loaded with the first httpx exception met: they use
  the classifier of :mod:`tdk.http`, which needs nothing of this package, and defining or
  running tools must not load httpx.
- :mod:`~tdk._failures.foreign`: what a foreign exception says, as text that is safe to keep
  (the URLs and credentials of the requests it carries scrubbed).
- :mod:`~tdk._failures.info`: the ``ErrorInfo`` of any exception (tdk's own read field by
  field, never trusted) or of text in tdk's ``str()`` format.
- :mod:`~tdk._failures.details`: copies of ``details`` that JSON takes, whatever a tool put
  there, and their redaction.
- :mod:`~tdk._failures.log_line`: an error as one line for operators.
- :mod:`~tdk._failures.hidden`: the characters no text tdk shows may carry raw.
- :mod:`~tdk._failures.link`: hands ``tdk.errors`` what it delegates to this package.
- :mod:`~tdk._failures.redact`: the one place that knows what a secret looks like; every
  text above, and every log line of tdk, goes through it. A package by layer (exact values,
  credentials by position, token shapes; the names of credentials; texts and URLs) whose
  modules import only each other: :mod:`tdk.http` uses it without the rest.
- :mod:`~tdk._failures.records`: results and errors made from values already checked,
  without validating them again.

``tdk.errors`` imports no tdk module: :meth:`ErrorInfo.from_exception
<tdk.errors.ErrorInfo.from_exception>`, ``from_error_string``, ``to_log_line`` and the
cleaning of ``details`` call through a slot of that module, which the ``tdk`` package fills
(see :mod:`tdk.errors`). This file imports nothing, so that :mod:`tdk.http` may read
:mod:`~tdk._failures.hidden` without loading the rest.
"""
