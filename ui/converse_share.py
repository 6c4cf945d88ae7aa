"""Handing a kept conversation over (issue #36): the report to paste into a chat after a demo (one HTML file with
the transcript, the timeline and the recording: services/converse/report.py), a link that opens the Converse page
with this conversation first (`?item=<conversation id>`, ui/item_links.py, for the people who may see it), and its
code (the `converse` line that holds it again and the Python of one turn: services/code/conversation.py)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from services.converse.report import report_html
from ui.code_views import code_panel
from ui.item_links import record_link

CONVERSE_PAGE = "pages/converse.py"
REPORT_LABEL = "Download the report (HTML)"


def share_panel(history: Any, record: Any, *, key: str = "") -> None:
    """The report's download (made when clicked: it embeds the recording), the link, and the Code panel."""
    left, right = st.columns(2)
    left.download_button(REPORT_LABEL, lambda: report_html(record), file_name=f"{record.id}.html", mime="text/html",
                         key=f"{key}report-{record.id}", on_click="ignore",
                         help="one self-contained file — the transcript, each turn's timeline, the recording — to "
                         "send after a demo; it names no server's address")
    record_link(CONVERSE_PAGE, record.id, right)
    code_panel(history, record.id, key=key)
