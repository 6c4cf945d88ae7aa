"""`python -m tests.late_run_ends run serve.py …`: Streamlit whose server sends each script run's end LATE_S late,
as a loaded machine's event loop can (tests/test_browser_voice.py's late-run-ends scenario).

Streamlit raises a session's `script_run_count` when it sends that message, so the next run, already going,
reads a count one behind; streamlit-webrtc took that for a page left and came back to, and stopped the voice
player (ui/webrtc_runs.py). Only the send is delayed: the message, its order and the count are Streamlit's own.
"""

from __future__ import annotations

import asyncio
import sys

LATE_S = 1.0


def _send_run_ends_late() -> None:
    from streamlit.runtime.runtime import Runtime

    send = Runtime._send_message

    def late(self, session_info, msg):  # Streamlit's event loop thread, as the original
        if msg.WhichOneof("type") == "script_finished":
            asyncio.get_running_loop().call_later(LATE_S, send, self, session_info, msg)
        else:
            send(self, session_info, msg)

    Runtime._send_message = late


if __name__ == "__main__":
    _send_run_ends_late()
    from streamlit.web.cli import main

    sys.argv[0] = "streamlit"
    sys.exit(main())
