"""Quire's web app, HTTP API and command line."""
