"""The AWS event-stream binary framing (application/vnd.amazon.eventstream), encoding side.

Decoding uses botocore's `EventStreamBuffer`; responses are plain, unsigned messages:

    prelude: total length (u32) | headers length (u32) | prelude CRC32
    headers: name length (u8) | name | value type (u8) | value
    payload | message CRC32
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

_TRUE, _FALSE, _INT32, _BYTES, _STRING = 0, 1, 4, 6, 7
MAX_PART_BYTES = 1024 * 1024  # larger model messages are split into PARTIAL ... COMPLETE parts


def _header(name: str, value: str | bytes | bool | int) -> bytes:
    raw_name = name.encode("utf-8")
    out = struct.pack("B", len(raw_name)) + raw_name
    if isinstance(value, bool):
        return out + struct.pack("B", _TRUE if value else _FALSE)
    if isinstance(value, int):
        return out + struct.pack("!Bi", _INT32, value)
    if isinstance(value, str):
        data, kind = value.encode("utf-8"), _STRING
    else:
        data, kind = bytes(value), _BYTES
    return out + struct.pack("!BH", kind, len(data)) + data


def encode_message(headers: dict[str, Any], payload: bytes) -> bytes:
    raw_headers = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack("!II", total, len(raw_headers))
    prelude += struct.pack("!I", zlib.crc32(prelude))
    message = prelude + raw_headers + payload
    return message + struct.pack("!I", zlib.crc32(message))


def payload_part(data: bytes, *, utf8: bool, complete: bool = True) -> bytes:
    """A ResponseStream `PayloadPart` event."""
    return encode_message(
        {
            ":message-type": "event",
            ":event-type": "PayloadPart",
            ":content-type": "application/octet-stream",
            "DataType": "UTF8" if utf8 else "BINARY",
            "CompletionState": "COMPLETE" if complete else "PARTIAL",
        },
        data,
    )


def response_part(data: bytes) -> bytes:
    """A `PayloadPart` event of InvokeEndpointWithResponseStream: the bytes alone (DataType and CompletionState
    belong to the bidirectional stream's parts)."""
    return encode_message(
        {":message-type": "event", ":event-type": "PayloadPart", ":content-type": "application/octet-stream"}, data
    )


def payload_parts(data: bytes, *, utf8: bool) -> list[bytes]:
    """One message as PayloadPart events: a single COMPLETE part, or PARTIAL pieces ending COMPLETE."""
    if len(data) <= MAX_PART_BYTES:
        return [payload_part(data, utf8=utf8)]
    pieces = [data[i:i + MAX_PART_BYTES] for i in range(0, len(data), MAX_PART_BYTES)]
    return [payload_part(p, utf8=utf8, complete=i == len(pieces) - 1) for i, p in enumerate(pieces)]


def exception_event(exception_type: str, message: str, error_code: str | None = None) -> bytes:
    """A modelled stream exception (`ModelStreamError`, `InternalStreamFailure`) as the SDK raises it."""
    body: dict[str, str] = {"Message": message}
    if error_code is not None:
        body["ErrorCode"] = error_code
    return encode_message(
        {":message-type": "exception", ":exception-type": exception_type, ":content-type": "application/json"},
        json.dumps(body).encode("utf-8"),
    )
