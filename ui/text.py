"""Text helpers for the pages (plain Python: no Streamlit here): `plain` and `code` make user or server text show
as typed in Streamlit's Markdown, `shorten` cuts a long one."""

from __future__ import annotations

import re


def shorten(text: str, limit: int) -> str:
    """`text` as it is when it has at most `limit` characters, else its first `limit` and an ellipsis."""
    return text if len(text) <= limit else text[:limit] + "…"


def code(text: str) -> str:
    """`text` as an inline code span: shown verbatim (escapes are not processed there), backticks removed."""
    return "`" + str(text).replace("`", "'") + "`"


_MARKDOWN_SPECIALS = "\\`*_{}[]()#+-.!|<>~$"
# What Markdown (GitHub's flavour, as Streamlit renders it) would change: links it makes by itself (URLs, www. names,
# e-mail addresses) and the arrows it draws.
# Escapes do not stop such a link, they show inside it (http://127\.0\.0\.1): these go in code spans.
_VERBATIM = re.compile(r"(?:\b[A-Za-z][A-Za-z0-9+.-]*://|\bwww\.)[^\s<>()\[\]{}'\"`]*[^\s<>()\[\]{}'\"`.,;:!?]"
                      r"|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
                      # Streamlit's Markdown turns these, standing alone, into → ← ↔ — ≥ ≤ ≈, escaped or not (a script
                      # error quoting a mistyped `->` showed "→", hiding the typo it named)
                      r"|(?<!\S)(?:<->|->|<-|--|>=|<=|~=)(?!\S)")


def _escaped(text: str) -> str:
    return "".join("\\" + c if c in _MARKDOWN_SPECIALS else c for c in text)


def plain(text: str) -> str:
    """`text` for st.markdown/st.error/st.caption, so user or server text shows as typed: Markdown's specials
    escaped, and what Markdown would turn into a link (a URL, an e-mail address) or an arrow (`->`) as inline
    code."""
    text, out, at = str(text), [], 0
    for m in _VERBATIM.finditer(text):
        out += [_escaped(text[at:m.start()]), code(m.group())]
        at = m.end()
    return "".join(out) + _escaped(text[at:])
