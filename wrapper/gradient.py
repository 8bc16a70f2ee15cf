"""Gradient's ``POST /models/{id}/complete``."""
