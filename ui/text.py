"""Text helpers for the pages (plain Python: no Streamlit here)."""

from __future__ import annotations


def shorten(text: str, limit: int) -> str:
    """`text` as it is when it has at most `limit` characters, else its first `limit` and an ellipsis."""
    return text if len(text) <= limit else text[:limit] + "…"
