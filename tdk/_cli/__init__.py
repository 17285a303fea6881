"""The ``tdk`` command and serving: what runs around a tool module in a process of its own.

- :mod:`~tdk._cli.process`: the command's process against what an imported module does to it
  (signals, threads, ``sys.exit``), and the supervised child that loads it.
- :mod:`~tdk._cli.streams`: stdout set aside while foreign code runs.
- :mod:`~tdk._cli.serving`: ``tdk serve``, a module's tools over MCP on stdio or HTTP.
- :mod:`~tdk._cli.served_streams` and :mod:`~tdk._cli.drain`: the standard streams of a
  server, whose output never blocks it.
- :mod:`~tdk._cli.addresses`: the address ``--host`` names, and who can reach it.

``tdk/__main__.py`` parses the command line and calls into this package. This file imports
nothing.
"""
