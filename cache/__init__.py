"""Answers already known, and work already under way."""
