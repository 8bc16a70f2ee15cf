"""Typed clients for Gradient's and Scale GP's completion APIs: ``wrapper.gradient``, ``wrapper.scale``."""
