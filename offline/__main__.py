"""`python -m offline [--host 127.0.0.1] [--port 8091] [--recognizer whisper|pocketsphinx]` — run the embedded
offline engine."""

from __future__ import annotations

import argparse
import logging


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m offline", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: loopback only)")
    parser.add_argument("--port", type=int, default=8091, help="TCP port (default 8091; 0 picks a free one)")
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--recognizer", choices=("whisper", "pocketsphinx"),
                        help="the speech recognizer (default whisper; OMNI_ENGINE_RECOGNIZER)")
    args = parser.parse_args(argv)
    if args.recognizer:
        import os

        os.environ["OMNI_ENGINE_RECOGNIZER"] = args.recognizer

    import uvicorn

    from offline.server import create_app

    logging.basicConfig(level=args.log_level.upper())
    uvicorn.run(create_app(), host=args.host, port=args.port, log_level=args.log_level, ws_max_size=16 * 1024 * 1024)


if __name__ == "__main__":
    main()
