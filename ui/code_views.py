"""The Code panel of a kept item: the Python, curl and CLI that make it again, unchanged (services/code) — each with
Streamlit's copy button, a download of each and of all three (with the reference files beside them), and the package
versions the Python needs, pinned as the studio pins them."""

from __future__ import annotations

import io
import logging
import zipfile
from typing import Any

import streamlit as st

from protocol.errors import StudioError
from services.code import LANGS, generate_all
from services.history import History
from ui.text import plain

log = logging.getLogger(__name__)

TITLES = {"python": "Python", "curl": "curl", "cli": "CLI"}
SUFFIXES = {"python": ".py", "curl": ".sh", "cli": ".sh"}


def code_panel(history: History, item_id: str, *, key: str = "") -> None:
    """An expander (closed) with the item's code, generated from its record on each draw (cheap: the record and its
    reference files, read once for the three forms); the studio's registered servers decide which address a script calls."""
    from ui.resources import target_book

    servers = [s.url for s in target_book().servers()]
    with st.expander("</> Code — make it again from a script", expanded=False):
        try:
            codes = generate_all(history, item_id, servers=servers)  # the record read once for the three
        except StudioError as exc:
            st.info(plain(str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 — a record the generators misread: this panel says so, the page stays
            log.exception("no code for %s", item_id)
            st.warning(plain(f"The code for {item_id} could not be made ({type(exc).__name__}); the server's log "
                             "has why."), icon="⚠️")
            return
        first = codes["python"]
        for note in first.notes:
            st.caption(plain(f"Note: {note}"))
        needs = ", ".join(first.packages) or "only Python's standard library"
        where = " and ".join(first.settings)
        st.caption(plain(f"The Python needs {needs} (pip install them). Set {where} to point it elsewhere; the "
                         "output file is named at its top."))
        for tab, lang in zip(st.tabs([TITLES[lang] for lang in LANGS]), LANGS):
            with tab:
                st.code(codes[lang].text, language="python" if lang == "python" else "bash")
                st.download_button(f"Download {TITLES[lang]}", codes[lang].text,
                                   file_name=f"{item_id}{SUFFIXES[lang]}", key=f"{key}code-{lang}-{item_id}",
                                   on_click="ignore")
        st.download_button("Download all three (and the reference files)", _bundle(item_id, codes, first.files),
                           file_name=f"{item_id}-code.zip", mime="application/zip", key=f"{key}code-zip-{item_id}",
                           on_click="ignore")


def _bundle(item_id: str, codes: dict[str, Any], files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for lang, code in codes.items():
            z.writestr(f"{item_id}-{lang}{SUFFIXES[lang]}", code.text)
        for name, data in files.items():
            z.writestr(name, data)
    return out.getvalue()
