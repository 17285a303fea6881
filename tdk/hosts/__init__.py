"""Tools and results in each model API's own format.

One module per host, each with the same verbs: ``tools(source)`` (the definitions in the
shape the API's ``tools=`` takes), ``calls(...)`` (the model's tool calls as
:class:`tdk.ToolCall`) and ``results(...)`` (the answers to append to the conversation)::

    from tdk.hosts import anthropic as ant, openai as oai

The adapters produce and read plain data: the SDKs are not needed to import them, and their
objects are read by attribute. See ``docs/hosts.md``.
"""
