"""Quire's document agents: read a PDF, extract structured fields, trace and report back."""
