"""The clients' machinery: what a call does, from its options to the transport and back.

Its public names are the package's (``wrapper``, ``wrapper.scale``, ``wrapper.gradient``,
``wrapper.apis``, ``wrapper.errors``, ``wrapper.testing``); nothing built on the clients imports from
here (``tests/test_layers.py``). docs/architecture.md walks one call through these modules.
"""
