"""Widgets the pages are built from."""
