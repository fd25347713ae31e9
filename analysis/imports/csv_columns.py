"""ratings.csv cut into integer-coded columns without a Python string per cell.

A 1.2-million-row file repeats the same few participant ids, responses and
block times, so each column becomes a ``Column``: per row a code into the
column's distinct texts, which are converted and checked once each. The
common file (no quoting, every line complete) is cut with numpy on its bytes
(``columns_fast``); anything else goes through the csv module record by record
(``columns_exact``), which knows exact line numbers for field-count problems.
"""

from __future__ import annotations

import codecs
import csv
import io
from collections.abc import Callable, Iterator
from typing import IO, AnyStr, Protocol

import numpy as np
import pandas as pd

from analysis.imports.iso_times import LONGEST_TIME, micros, time_micros


class ProblemList(Protocol):
    def add(self, file: str, line: int, column: str, message: str) -> None: ...


def text_view(file: IO) -> IO[str]:
    """A text view of an upload, binary or text; utf-8 with or without BOM."""
    if isinstance(file, io.TextIOBase):
        return file
    if hasattr(file, "read") and isinstance(file.read(0), bytes):
        return io.TextIOWrapper(file, encoding="utf-8-sig", newline="")
    return file


class Column:
    """One column of ratings.csv: per row a code into the column's distinct (stripped) texts.

    A file repeats the same few ids, numbers and times, so every conversion and
    check runs once per distinct text and reaches the rows through the codes.
    Cut from bytes, the distinct texts may come as ``raw``: their UTF-8 bytes
    (zero-padded rows, no NUL in them) and byte lengths, decoded when asked for.
    """

    def __init__(self, codes: np.ndarray, texts: np.ndarray | None = None,
                 raw: tuple[np.ndarray, np.ndarray] | None = None):
        self.codes = codes  # int64, one per row
        self._texts = texts  # object array of distinct str
        self.raw = raw

    @property
    def texts(self) -> np.ndarray:
        if self._texts is None:
            cells = self.raw[0]
            lines = np.full((len(cells), cells.shape[1] + 1), ord("\n"), dtype=np.uint8)
            lines[:, :-1] = cells
            # All at once: one text per line, the zero padding dropped, decoded and split in C.
            self._texts = np.array(lines.tobytes().decode("utf-8").replace("\0", "").split("\n")[:-1], dtype=object)
        return self._texts

    def text(self, code: int) -> str:
        if self._texts is not None:
            return self._texts[code]
        cells, sizes = self.raw
        return cells[code, : sizes[code]].tobytes().decode("utf-8")

    def __getitem__(self, row: int) -> str:
        return self.text(self.codes[row])

    def is_(self, text: str) -> np.ndarray:
        """Per row: is the cell ``text``?"""
        if text == "" and self._texts is None:
            return (self.raw[1] == 0)[self.codes]
        return np.asarray(self.texts == text, dtype=bool)[self.codes]

    def rows(self, keep: np.ndarray) -> Column:
        return Column(self.codes[keep], self._texts, self.raw)

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(self.texts))

    @staticmethod
    def of(cells: np.ndarray) -> Column:
        codes, texts = pd.factorize(cells)
        return Column(codes.astype(np.int64), np.asarray(texts, dtype=object))


def parse_times(texts: Column) -> np.ndarray:
    """Microseconds since the epoch per cell (NaN when empty or unparseable)."""
    if texts.raw is None:
        return time_micros(texts.texts)[texts.codes]
    cells, sizes = texts.raw
    chars = np.zeros((LONGEST_TIME, len(sizes)), dtype=np.uint8)
    width = min(cells.shape[1], LONGEST_TIME)
    chars[:width] = cells[:, :width].T
    return micros(chars, sizes, texts.text)[texts.codes]


class NotText(Exception):
    """An upload that is not UTF-8 CSV text: the line (from 1) and column where it shows, and why."""

    def __init__(self, line: int, column: str, message: str):
        self.line, self.column, self.message = line, column, message
        super().__init__(f"{line}:{column}: {message}")


SAVE_AS_UTF8 = 'save the file as UTF-8 (in Excel: "CSV UTF-8")'
NUL_MESSAGE = "holds a NUL character (byte 0x00), which no text can contain; remove it"

# What a file that is not text at all starts with (the longer prefix first: a UTF-32 mark starts like UTF-16's).
_NOT_TEXT = [
    (b"\x1f\x8b", "gzip-compressed, not CSV text; decompress it (e.g. gunzip) and upload the .csv inside"),
    (b"PK\x03\x04", "a zip archive (an Excel .xlsx workbook?), not CSV text; " + SAVE_AS_UTF8),
    (b"\xd0\xcf\x11\xe0", "an Excel .xls workbook, not CSV text; " + SAVE_AS_UTF8),
    (codecs.BOM_UTF32_LE, "UTF-32 text (it starts with a UTF-32 byte-order mark), not UTF-8; " + SAVE_AS_UTF8),
    (codecs.BOM_UTF32_BE, "UTF-32 text (it starts with a UTF-32 byte-order mark), not UTF-8; " + SAVE_AS_UTF8),
    (codecs.BOM_UTF16_LE, "UTF-16 text (it starts with a UTF-16 byte-order mark), not UTF-8; " + SAVE_AS_UTF8),
    (codecs.BOM_UTF16_BE, "UTF-16 text (it starts with a UTF-16 byte-order mark), not UTF-8; " + SAVE_AS_UTF8),
]


def _not_text(raw: bytes) -> NotText | None:
    """Why bytes with a NUL or a non-ASCII byte are not UTF-8 CSV text, or None when they are."""
    for magic, message in _NOT_TEXT:
        if raw.startswith(magic):
            return NotText(1, "", message)
    first_line = raw[: raw.find(b"\n")] if b"\n" in raw else raw
    if first_line.count(0) * 3 > len(first_line) > 0:
        return NotText(1, "", "UTF-16 text (every other byte is 0), not UTF-8; " + SAVE_AS_UTF8)
    return None


def _not_utf8(data: bytes, exc: UnicodeDecodeError) -> NotText:
    """Where the first byte that is not UTF-8 sits: line, column (named by the header), character."""
    line = data.count(b"\n", 0, exc.start) + 1
    line_start = data.rfind(b"\n", 0, exc.start) + 1
    before = data[line_start:exc.start].decode("utf-8")
    column = ""
    if line > 1:
        try:
            names = next(csv.reader([data[: data.find(b"\n")].decode("utf-8")]))
            index = len(next(csv.reader([before]))) - 1 if before else 0
            column = names[index].strip().lower() if index < len(names) else ""
        except (csv.Error, UnicodeDecodeError, StopIteration):
            column = ""
    return NotText(line, column, f"not UTF-8 text (byte 0x{data[exc.start]:02X} at character {len(before) + 1} "
                                 f"of the line); {SAVE_AS_UTF8}")


def _utf8_text(raw: bytes) -> str:
    """``raw`` decoded as ``io.TextIOWrapper(file, "utf-8-sig", newline="")`` would; NotText if it is not text."""
    if problem := _not_text(raw):
        raise problem
    data = raw[len(codecs.BOM_UTF8):] if raw.startswith(codecs.BOM_UTF8) else raw
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(data, exc) from None


class Upload:
    """A whole upload: its text as ``text_view`` reads it and, when it came as bytes, those bytes less
    a leading BOM, which are the text's UTF-8 encoding (strict decoding round-trips). Plain ASCII
    is decoded only if the text is asked for: the fast reader works on the bytes.

    Raises ``NotText`` for an upload that is not UTF-8 text (another encoding, a compressed
    file or a workbook), naming the line; ``has_nul`` tells whether some cell may hold a NUL,
    which PostgreSQL cannot store in text (the readers then refuse those cells)."""

    def __init__(self, file: IO):
        self.data: bytes | None = None
        self._text: str | None = None
        if isinstance(file, io.TextIOBase) or not (hasattr(file, "read") and isinstance(file.read(0), bytes)):
            try:
                self._text = lf_line_endings(text_view(file).read())
            except UnicodeDecodeError as exc:
                raise _undecodable_text_file(file, exc) from None
            self.has_nul = "\0" in self._text
            if self.has_nul and (problem := _not_text(self._text.encode("utf-8"))):
                raise problem
            return
        raw = lf_line_endings(file.read())
        self.has_nul = b"\0" in raw
        if not raw.isascii():
            self._text = _utf8_text(raw)
        elif self.has_nul and (problem := _not_text(raw)):
            raise problem
        self.data = raw[len(codecs.BOM_UTF8):] if raw.startswith(codecs.BOM_UTF8) else raw

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.data.decode("ascii")
        return self._text

    def lines(self) -> Iterator[str]:
        """The lines of the text as ``io.StringIO(text)`` yields them, one at a time."""
        if self._text is not None:
            yield from lines_of(self._text)
            return
        start = 0
        while start < len(self.data):
            end = self.data.find(b"\n", start)
            end = len(self.data) if end < 0 else end + 1
            yield self.data[start:end].decode("ascii")
            start = end


def lf_line_endings(content: AnyStr) -> AnyStr:
    """A file saved with classic-Mac line endings (a CR alone ends each line, no LF anywhere) with LFs instead,
    so that every reader splits it into its lines; other files are left as they are (a CR inside a quoted
    cell of a CRLF file is the cell's own)."""
    cr, lf = ("\r", "\n") if isinstance(content, str) else (b"\r", b"\n")
    return content.replace(cr, lf) if cr in content and lf not in content else content


def _undecodable_text_file(file: IO, exc: UnicodeDecodeError) -> NotText:
    """A file opened as text whose bytes are not UTF-8: located in those bytes when they can be read again."""
    buffer = getattr(file, "buffer", None)
    if buffer is not None and buffer.seekable():
        buffer.seek(0)
        try:
            _utf8_text(lf_line_endings(buffer.read()))
        except NotText as problem:
            return problem
    return NotText(1, "", f"not UTF-8 text ({exc.reason}); {SAVE_AS_UTF8}")


def lines_of(content: str) -> Iterator[str]:
    """The lines of ``content`` as ``io.StringIO(content)`` yields them, without copying the whole text."""
    start = 0
    while start < len(content):
        end = content.find("\n", start)
        end = len(content) if end < 0 else end + 1
        yield content[start:end]
        start = end


def columns_fast(upload: Upload, header: list[str]) -> tuple[np.ndarray, dict[str, Column]] | None:
    """The common file: no quoting, one record per line, every line the right number of fields
    (checked by counting commas). None sends the file to the exact reader.

    Cut with numpy on the encoded bytes (cells lie between commas and newlines)
    and factorized 8 bytes at a time: no Python string per cell. The cells are
    those pandas' C reader gave for such a file (the reader this replaced): a
    line holds one record; a whitespace-only line (no comma) is a record whose
    first cell is that whitespace; a record of empty cells is dropped.
    """
    if upload.data is None:
        content = upload.text.replace("\r\n", "\n") if "\r" in upload.text else upload.text
        if '"' in content or "\r" in content:
            return None
        encoded = content.encode("utf-8")
    else:  # the same tests on the UTF-8 bytes, where these characters are single bytes
        encoded = upload.data.replace(b"\r\n", b"\n") if b"\r" in upload.data else upload.data
        if b'"' in encoded or b"\r" in encoded:
            return None
    separators = len(header) - 1
    lines = _Lines(np.frombuffer(encoded, dtype=np.uint8), separators)
    full = lines.commas == separators
    if not full.all() and not _short_lines_blank(encoded, lines, full):
        return None
    comma = lines.comma_offsets(full, separators)

    cells = _Cells(encoded)
    padded = b" " in encoded or b"\t" in encoded  # stripping costs a Python call per text: only when needed
    blank = np.ones(len(lines.starts), dtype=bool)
    columns: dict[str, Column] = {}
    for k, column in enumerate(header):
        left = lines.starts if k == 0 else comma(k - 1) + 1
        right = lines.ends if k == separators else comma(k)
        length = np.maximum(right - left, 0)
        blank &= length == 0
        columns[column] = cells.column(left, length, strip=padded)
    keep = ~blank
    numbers = np.arange(2, len(lines.starts) + 2, dtype=np.int64)
    if keep.all():
        return numbers, columns
    return numbers[keep], {column: values.rows(keep) for column, values in columns.items()}


class _Lines:
    """The lines after the header of an encoded file (``content.split("\\n")[1:]``, less the empty
    piece after a final newline): offsets, and commas counted from one pass over the bytes."""

    def __init__(self, data: np.ndarray, separators: int):
        marks = _newlines_and_commas(data)
        kinds = data[marks]
        self.table = self._table(data, marks, kinds, separators)
        if self.table is not None:
            self.starts = self.table[:-1, separators] + 1
            self.ends = self.table[1:, separators]
            self.commas = np.full(len(self.starts), separators)
            return
        is_newline = kinds == ord("\n")
        self.comma_at = marks[~is_newline]
        newline = np.flatnonzero(is_newline)  # index in marks of each newline
        self.starts = marks[newline] + 1
        self.ends = np.append(marks[newline[1:]], len(data)).astype(marks.dtype)[: len(newline)]
        self.first_comma = newline - np.arange(len(newline))  # commas before each newline
        self.commas = np.append(self.first_comma[1:], len(self.comma_at))[: len(newline)] - self.first_comma
        if len(self.starts) and self.starts[-1] == len(data):
            self.starts, self.ends = self.starts[:-1], self.ends[:-1]
            self.first_comma, self.commas = self.first_comma[:-1], self.commas[:-1]

    @staticmethod
    def _table(data: np.ndarray, marks: np.ndarray, kinds: np.ndarray, separators: int) -> np.ndarray | None:
        """The common layout, every line (the header too) its commas and then a newline (or the end
        of the file), as one row of offsets per line; None for any other."""
        if len(data) and data[-1] != ord("\n"):
            marks, kinds = np.append(marks, len(data)), np.append(kinds, ord("\n"))
        if not len(marks) or len(marks) % (separators + 1):
            return None
        kinds = kinds.reshape(-1, separators + 1)
        if not ((kinds[:, :separators] == ord(",")).all() and (kinds[:, separators] == ord("\n")).all()):
            return None
        return marks.reshape(-1, separators + 1)

    def comma_offsets(self, full: np.ndarray, separators: int) -> Callable[[int], np.ndarray]:
        """Offset of each line's k-th comma, by k; a (blank) line without commas gives its end."""
        if self.table is not None:
            table = self.table[1:]
            return lambda k: table[:, k]
        padded = np.append(self.comma_at, 0)  # an index past the last comma stays inside
        return lambda k: np.where(full, padded[np.minimum(self.first_comma + k, len(self.comma_at))], self.ends)


_SCAN_CHUNK = 1 << 20


def _newlines_and_commas(data: np.ndarray) -> np.ndarray:
    """Offsets of the newlines and commas, in order. Scanned a chunk at a time so that the masks
    stay in cache instead of filling (and first touching) hundreds of megabytes."""
    offset = np.int32 if len(data) < 2**31 - 64 else np.int64
    hit, comma = np.empty(_SCAN_CHUNK, dtype=bool), np.empty(_SCAN_CHUNK, dtype=bool)
    found = [np.zeros(0, dtype=offset)]
    for start in range(0, len(data), _SCAN_CHUNK):
        chunk = data[start:start + _SCAN_CHUNK]
        size = len(chunk)
        np.equal(chunk, ord("\n"), out=hit[:size])
        np.equal(chunk, ord(","), out=comma[:size])
        np.logical_or(hit[:size], comma[:size], out=hit[:size])
        found.append(np.flatnonzero(hit[:size]).astype(offset) + offset(start))
    return np.concatenate(found)


def _short_lines_blank(encoded: bytes, lines: _Lines, full: np.ndarray) -> bool:
    """Whether every line without the full count of commas is blank (no comma, only whitespace)."""
    short = np.flatnonzero(~full)
    if (lines.commas[short] != 0).any():
        return False  # a comma too many or too few
    return not any(encoded[lines.starts[i]:lines.ends[i]].decode("utf-8").strip() for i in short)


class _Cells:
    """Cells of an encoded file given as (offset, length) arrays, turned into columns of texts.

    A cell is read 8 bytes at a time, each word as one uint64 with the bytes
    past the cell's end zeroed, and the words are factorized: no Python string
    per cell, only per distinct text. Zero padding is unambiguous unless the
    file holds NUL bytes; then the length is part of the key too.
    """

    _LOW_BYTES = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=np.uint64)  # a word's first n bytes

    def __init__(self, encoded: bytes):
        self.encoded = encoded
        # Word i = bytes i..i+7 as one uint64, read in place; the last offsets (fewer than 8 bytes
        # left) read from a zero-padded copy of the file's end.
        self.last = max(len(encoded) - 8, 0)
        data = np.frombuffer(encoded, dtype=np.uint8)
        self.head = np.ndarray((len(encoded) - 7 if len(encoded) >= 8 else 0,), dtype="<u8", buffer=data, strides=(1,))
        tail = np.frombuffer(encoded[self.last:] + bytes(8), dtype=np.uint8)
        self.tail = np.ndarray((len(tail) - 7,), dtype="<u8", buffer=tail, strides=(1,))
        self.has_nul = b"\0" in encoded

    def word(self, left: np.ndarray, length: np.ndarray, w: int) -> np.ndarray:
        """Bytes 8w..8w+7 of each cell as a uint64, zero past the cell's end."""
        at = np.minimum(left + 8 * w, len(self.encoded)) if w or left.max(initial=0) > len(self.encoded) else left
        if at.max(initial=0) <= self.last and len(self.head):
            word = self.head[at]
        elif len(self.head):
            word = self.head[np.minimum(at, self.last)]
            late = np.flatnonzero(at > self.last)
            word[late] = self.tail[at[late] - self.last]
        else:
            word = self.tail[at]
        keep = length - 8 * w  # bytes of the cell in this word
        if keep.min(initial=8) >= 8:
            return word  # every cell fills the word
        word &= self._LOW_BYTES[np.clip(keep, 0, 8, out=keep)]
        return word

    def column(self, left: np.ndarray, length: np.ndarray, strip: bool) -> Column:
        words = [self.word(left, length, w) for w in range(-(-int(length.max(initial=0)) // 8))]
        codes, first = run_codes(([length] if self.has_nul else []) + words, len(left))
        if self.has_nul:
            spans = zip(left[first].tolist(), (left + length)[first].tolist())
            column = Column(codes, np.array([self.encoded[a:b].decode("utf-8") for a, b in spans], dtype=object))
        elif words:
            column = Column(codes, raw=(np.stack([word[first] for word in words], axis=1).view(np.uint8), length[first]))
        else:
            column = Column(codes, raw=(np.zeros((len(first), 0), dtype=np.uint8), length[first]))
        if not strip:
            return column
        stripped, texts = pd.factorize(np.array([text.strip() for text in column.texts], dtype=object))
        return Column(stripped[codes], np.asarray(texts, dtype=object))


def run_codes(parts: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """``_combined(parts, n)`` and the row where each code first appears. When runs of equal rows
    are long, only the first row of each run is hashed: a file lists a participant's rows
    together, and a block's rows share their times."""
    same = np.ones(max(n - 1, 0), dtype=bool)
    for part in parts:
        same &= part[1:] == part[:-1]
    starts = np.flatnonzero(np.r_[True, ~same]) if n else np.zeros(0, dtype=np.int64)
    if len(starts) > n // 2:
        codes = _combined(parts, n)
        return codes, _first_rows(codes)
    run = _combined([part[starts] for part in parts], len(starts))
    return np.repeat(run, np.diff(np.r_[starts, n])), starts[_first_rows(run)]


def _combined(parts: list[np.ndarray], n: int) -> np.ndarray:
    """A code per row (of ``n``), equal exactly where every part is (NaN equal to NaN, as in
    ``duplicated``), numbered in order of first appearance."""
    if len(parts) == 1:
        return pd.factorize(parts[0], use_na_sentinel=False)[0]
    codes = np.zeros(n, dtype=np.int64)
    span = 1
    for part in parts:
        part_codes, distinct = pd.factorize(part, use_na_sentinel=False)
        codes, span = pack(codes, span, part_codes, len(distinct))
    return pd.factorize(codes)[0]


def _first_rows(codes: np.ndarray) -> np.ndarray:
    """The row where each code first appears, for codes numbered in order of first appearance."""
    if not len(codes):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, codes[1:] > np.maximum.accumulate(codes)[:-1]])


def columns_exact(content: str, header: list[str], name: str, problems: ProblemList) -> tuple[np.ndarray, dict[str, Column]]:
    """The csv module, record by record: exact line numbers and field-count problems."""
    reader = csv.reader(lines_of(content))
    next(reader)
    width = len(header)
    lines: list[int] = []
    records: list[list[str]] = []
    try:
        for cells in reader:
            if len(cells) != width:
                if cells and any(cell.strip() for cell in cells):
                    problems.add(name, reader.line_num, "", f"expected {width} fields, found {len(cells)}")
                continue
            records.append(cells)
            lines.append(reader.line_num)
    except csv.Error as exc:
        problems.add(name, reader.line_num, "", f"cannot read the file: {exc}")
    columns = list(zip(*records)) if records else [()] * width
    return np.array(lines, dtype=np.int64), {
        column: Column.of(np.array([cell.strip() for cell in values], dtype=object))
        for column, values in zip(header, columns)
    }


def pack(codes: np.ndarray, span: int, more: np.ndarray, more_span: int) -> tuple[np.ndarray, int]:
    """Codes of the (codes, more) pairs, and their span; renumbered (hashing) only when the span
    would outgrow arrays indexed by code, about twice the rows."""
    if span * more_span >= 2**62:
        codes, distinct = pd.factorize(codes)
        span = len(distinct)
    codes, span = codes * more_span + more, span * more_span
    if span > 2 * len(codes) + 65536:
        codes, distinct = pd.factorize(codes)
        span = len(distinct)
    return codes, span
