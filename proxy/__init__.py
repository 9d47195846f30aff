"""Overspill: an OpenAI-compatible proxy that routes between local engines and cloud APIs."""
