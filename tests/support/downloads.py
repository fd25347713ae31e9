"""What a (streamed or plain) download response holds."""

from __future__ import annotations

import csv
import io


def response_bytes(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def csv_rows(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(response_bytes(response).decode())))
