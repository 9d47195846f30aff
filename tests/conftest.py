"""Shared pytest configuration; process helpers live in tests/processes.py."""
