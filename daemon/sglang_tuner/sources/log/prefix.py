"""What a tool put around SGLang's own log line, taken off: the terminal's colours, `docker
compose logs` (`svc-1  | `), journalctl (`short`, `short-precise`, `short-iso`, `short-full`,
`short-unix`), `kubectl logs --timestamps` and `docker logs -t` (an RFC 3339 stamp), `kubectl
logs --prefix` (`[pod/name/container] `), Ray's worker prefix (`(ActorName pid=123) `), the
CRI runtime's files (`<RFC 3339> stdout F `),
a notebook's saved outputs (each line a JSON string in an `.ipynb`'s "text" array),
JSON lines (docker's json-file `{"log", "stream", "time"}`, journalctl `-o json`, fluent-bit,
vector, Loki's `logcli --output jsonl`, Google Cloud Logging's `textPayload`, OpenTelemetry's
`body`: a message field and a time field), Loki's `logcli query` default output (`<RFC 3339>
{labels} `), Google Cloud Logging's printed entries (`ERROR <RFC 3339> `), Python logging's
layouts around SGLang's message (`asctime LEVEL name: `, `[asctime][file:line][LEVEL]: `), a
second dated bracket before SGLang's own (`[2025-03-11 16:44:27] [2025-03-11 01:44:27 TP0] `),
SGLang's own prefix with its opening bracket lost in a paste, and any other prefix before one of
SGLang's own messages (its time kept where it prints one). What a paste adds is taken off too:
indentation, quote marks (`> `), list bullets, line numbers, inline-code backticks, HTML's
escapes (`&quot;`), and lines whose newlines were lost are split at SGLang's prefixes and a
traceback in them at its frames, lines a terminal cut at its width are joined again
(`pasted_lines`). Wrappers nest (compose around `-t`
stamps, a collector around CRI lines): each is taken off in turn.

Pure and linear in the line's length: every regex is anchored at the line's start and bounded
(a wrapper is short), and a JSON record longer than `MAX_JSON_CHARS` is read as plain text.
"""

import html
import json
import re
from collections.abc import Iterable, Iterator
from datetime import date, datetime, timezone
from typing import Any, NamedTuple

from sglang_tuner.sources.log.messages.exceptions import EXCEPTION_NAME, FRAME_FUNC, FRAME_HEAD

MAX_JSON_CHARS = 1 << 20
_DEPTH = 4  # wrappers taken off one line at most (compose + -t + CRI + JSON is the deepest seen)
_ANSI = re.compile(r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|\x1b[@-Z\\-_]")
# RFC 3339 as kubectl, docker, CRI and journalctl's short-iso print it (journalctl: "+0000").
_RFC3339 = re.compile(
    r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?(Z|[+-]\d\d:?\d\d)?[ \t]"
)
# Loki's `logcli query` default output: the stream's labels after the stamp
_LOKI_LABELS = re.compile(r"\{([^{}\n]{0,1024})\}[ \t]")
_LOKI_STREAM = re.compile(r'(?:container|pod|service_name|job)="([^"]{1,256})"')
_CRI = re.compile(r"(?:stdout|stderr) [FP] ")
# Google Cloud Logging's entries as its console and `gcloud logging read --format` print them:
# the entry's LogSeverity, then its RFC 3339 timestamp (`ERROR 2025-04-04T06:24:51.493646621Z `)
_SEVERITY = re.compile(
    r"(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL|ALERT|EMERGENCY)[ \t]{1,8}(?=\d{4}-)"
)
# journalctl's "host identifier[pid]: ", after its stamp
_JOURNAL = re.compile(r"[^\s\[]\S{0,254} ([^\s\[:]{1,128})(?:\[\d{1,10}\])?: ")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_SHORT = re.compile(r"([A-Z][a-z]{2}) ([ \d]\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))? ")
_SHORT_FULL = re.compile(
    r"[A-Z][a-z]{2} (\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d{1,9}))? [A-Za-z+\d-]{1,6} "
)
_ISO = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?(Z|[+-]\d\d:?\d\d)?$")
_EPOCH_DAY = date(1970, 1, 1).toordinal()
_SHORT_UNIX = re.compile(r"(\d{9,11})(?:\.(\d{1,9}))? ")
_COMPOSE = re.compile(r"([A-Za-z0-9][\w.-]{0,127}) {0,64}\|(?: |$)")
_OUTER_STAMP = re.compile(r"\[(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?\] (?=\[\d)")
# Python logging's usual layouts around SGLang's message (a wrapper's or a custom logging config:
# `%(asctime)s %(levelname)s %(process)d [%(filename)s:%(lineno)d] %(message)s`, the same with
# SGLang's rank tags before the file (`[DP3 TP3 EP3 scheduler_metrics_mixin.py:222]`, kept as
# SGLang's own prefix holds them: each DP rank is its own scheduler), `asctime -
# name - LEVEL - message`, `asctime LEVEL:name:message`, `asctime [LEVEL] name: message`): the
# time kept, SGLang's message after.
_LEVEL = "(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)"
_PYLOG = re.compile(
    r"(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))? (?:- )?(?:[\w.]{1,128} - )?"
    rf"(?:{_LEVEL}(?: -|:[\w.]{{1,128}}:)?|\[{_LEVEL}\](?: [\w.]{{1,128}}:)?) ?"
    r"(?:\d{1,10} )?(?:\[ ?((?:[A-Z_]{1,8}\d{1,6} ){0,8})[^\]\s]{1,256}\] )?(?=[^\[\s])"
)
# Python logging's bracketed layout: `[%(asctime)s][%(filename)s:%(lineno)d][%(levelname)s]: `
# (one to four brackets after the time's; a colon or not)
_PYLOG_BRACKETS = re.compile(
    r"\[(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?\]"
    r"(?:\[[^\]\s][^\]]{0,255}\]){1,4}:? ?"
)
_KUBECTL_PREFIX = re.compile(r"\[pod/([^\]\s]{1,512})\] ")  # kubectl logs --prefix: pods' logs
# PyTorch's rank tag before each line a distributed rank writes to stderr (torch 2.2+: its C++
# warnings, `[rank0]:[W1107 ...] ProcessGroupNCCL ...`, and a rank's traceback, `[rank0]:
# Traceback ...`, `[rank0]: RuntimeError: ...`)
_TORCH_RANK = re.compile(r"\[rank\d{1,6}\]: ?")
# Ray's driver output: each worker's line behind `(ActorName pid=123) ` or `(Actor pid=123,
# ip=10.0.0.1) `, a deduplicated one ending in ` [repeated 3x across cluster]` (the RL frameworks
# that run SGLang engines as Ray actors print their logs this way)
_RAY = re.compile(r"\(([\w.:-]{1,128} pid=\d{1,10})(?:, ip=[\w.:-]{1,64})?\) ")
_RAY_REPEATED = re.compile(r" ?\[repeated \d{1,10}x across cluster\]$")
_BRACKET_LOST = re.compile(
    r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?: [A-Z_]{1,8}\d{1,6}){0,8}\] "
)
# SGLang's own messages that open a line after its prefix: found behind a prefix no layer above
# knows (another framework's logging config around an embedded SGLang, a tool nobody listed),
# the prefix is taken off and its time kept.
_OPENERS = re.compile(
    r"(?:Decode batch|Prefill batch|KV cache pool is full|Scheduler hit an exception"
    r"|Load weight (?:begin|end)|KV Cache is allocated|Memory pool end|Capture cuda graph"
    r"|max_total_num_tokens=|new fill batch\. |Prefil batch\. |#running-req: \d+, #token: )"
)  # the last three: 0.1.x's batch lines (its fill and decode lines open with no label)
_FOREIGN_CHARS = 160  # the longest unknown prefix taken off
# What a paste puts before a log line: indentation, e-mail and markdown quote marks, a list
# bullet or a diff's `+`/`-` (the indentation after it), a line number (`cat -n`, an editor's
# gutter), inline-code backticks.
_PASTE = re.compile(
    r"([ \t]{0,64})((?:>[ \t]?){0,8})"
    r"(?:([-*+\u2022][ \t]{1,64})|(\d{1,7})([ \t]{0,8}[|:][ \t]{0,8}|[ \t]{1,8}))?(`{0,3})"
)
# What a decoration may stand before without quote marks: a log line's own start (SGLang's
# bracket, a stamp, a JSON record), one of SGLang's messages, a traceback's head or its final
# exception; never a traceback's indented line.
_PASTED_START = re.compile(
    r'[\[{]|"(?=[\[{\d])|'
    r"\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|Traceback \(|[A-Za-z_][\w.]{0,128}(?:Error|Exception)\b|"
    + _OPENERS.pattern
)
# A paste whose newlines were lost: SGLang's next prefix inside the line, after a space, a tab,
# a carriage return (a terminal's capture), an escaped newline (`\n` of a JSON string or an
# issue's export) or nothing at all ("... #queue-req: 0 [2025-06-01 10:00:05 TP0] Decode batch").
_INNER_PREFIX = re.compile(
    r"(?:[ \t\r]|\\r\\n|\\n|\\r)?"
    r"(?=\[(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?: [A-Z_]{1,8}\d{1,6}){0,8}\] )"
)
# A batch or retraction line of SGLang's (after its prefix)
_CUT_OPENERS = (
    "Decode batch",
    "Prefill batch",
    "KV cache pool is full",
    "Decode out of memory happened",
    "decode out of memory happened",
    "Testing retraction",
)
_COMPLETE = re.compile(r"#queue-req: \d|#retracted_reqs: \d")
# A traceback whose newlines were lost: cut before each frame (`File "...", line N`), before a
# traceback's head unless SGLang's own header holds it ("Scheduler hit an exception: Traceback
# (most recent call last):" is one line as SGLang prints it) and before a chained exception's
# words; inside a frame's piece, its code and the exception after it (`_EXCEPTION_AFTER`).
_TRACEBACK_CUT = re.compile(
    r"[ \t]*(?:(?<!exception: )(?=Traceback \(most recent call last\):)"
    rf"|(?={FRAME_HEAD})"
    r"|(?=During handling of the above exception|The above exception was the direct cause))"
)
# A frame as Python prints it, to the line's end, and one a terminal may have cut (as long as
# its width, `_WIDTH` at least, its `File "` inside it)
_WHOLE_FRAME = re.compile(rf"{FRAME_HEAD}, in {FRAME_FUNC}$")
_CUT_FRAME = re.compile(r'File "[^\n]{0,1024}$')
_WIDTH = 60
_LINE_STARTS = ("[", 'File "', "Traceback (", "During handling", "The above exception")
# one frame with its code after it on the same line (a two-line paste whose newline was lost)
_CODE_AFTER = re.compile(rf"{FRAME_HEAD}, in {FRAME_FUNC}[ \t]+\S")
_FRAME_AT = re.compile(rf"{FRAME_HEAD}(?:, in {FRAME_FUNC})?")
# an exception's name and colon after the code a frame shows (as `messages.exceptions` reads
# one: "RuntimeError: ...", "torch.OutOfMemoryError: ...", "Exception: ...")
_EXCEPTION_AFTER = re.compile(
    rf"(?<=\s){EXCEPTION_NAME}:(?:\s|$)"
    rf"|(?<=\s)(?<!raise\s){EXCEPTION_NAME}$"  # a bare one at the end ("... NotImplementedError")
)
# a line of its own: SGLang's, a JSON record, a traceback's (two spaces: a cut leaves one)
_NOT_A_PIECE = frozenset("[{\t")
_PIECES = 4  # a line cut into more pieces than this is left in pieces
# A whole line that is one JSON string literal (a comma after it: an array's element)
_JSON_STRING = re.compile(r'("(?:[^"\\\n]|\\.){0,65536}"),?[ \t]*$')
# HTML's escapes of the characters SGLang's lines and tracebacks hold (`File &quot;...&quot;`,
# `-&gt;`, `&#39;NoneType&#39;`), as a page's source or an HTML export carries them
_ENTITY = re.compile(r"&(?:quot|gt|lt|amp|apos|#\d{2,3}|#x[0-9a-fA-F]{2});")
_BRACKETS_ONLY = re.compile(r"(?:\[[^\]]{0,96}\][ \t]*)*")
_FIRST_PREFIX = re.compile(r"\[[^\]]{0,96}\] ")
# SGLang's request log: a prompt inside it is the client's text, never SGLang's message (never
# split into lines here, never a signal in `lines.py`)
REQUEST_LOG = ("Receive: ", "Finish: ", "Receive req", "Abort ")
# A prefix is a log layout's only with a time or a level in it, and no exception's words (an
# exception's message may quote SGLang's: "Exception: Capture cuda graph failed").
_FOREIGN_LEVEL = re.compile(rf"\b{_LEVEL}\b|\b(?:debug|info|warn|warning|error)\b")
_FOREIGN_NOT = re.compile(r"(?:Error|Exception|Warning|Exit|Interrupt|Failure)\b|Traceback|File ")
_FOREIGN_DAY = re.compile(r"(\d{4})[-/](\d\d)[-/](\d\d)")
_FOREIGN_CLOCK = re.compile(r"(?<!\d)(\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(?!\d)")
# JSON fields, most specific first (docker: log; vector, fluent-bit: message or log; journald:
# MESSAGE; logcli: line; VictoriaLogs: _msg; Google Cloud Logging: textPayload; OpenTelemetry:
# body / Body)
_MESSAGE_KEYS = ("log", "message", "MESSAGE", "msg", "line", "_msg", "body", "textPayload", "Body")
_TIME_KEYS = ("time", "timestamp", "@timestamp", "__REALTIME_TIMESTAMP", "_time", "ts", "date")
_STREAM_KEYS = ("container_name", "container", "pod_name", "pod", "_SYSTEMD_UNIT",
                "SYSLOG_IDENTIFIER", "service", "host")  # fmt: skip


class Unwrapped(NamedTuple):
    """A line without its wrappers: SGLang's own text, the time a wrapper stamped, its source."""

    text: str
    ts: float | None  # Unix seconds (None: no wrapper stamped one, or one without a year)
    stream: str  # the container, service or unit the line came from ("" when unnamed)


def unwrap_lines(
    lines: Iterable[str], year: int | None = None
) -> Iterator[tuple[str, float | None, str]]:
    """`unwrap` of each line, but a line that opens with a bracket, as most are, passes as it
    is: SGLang's own; a wrapper's dated bracket before SGLang's prefix is read past where the
    line is read (`lines.py`: the message, `line_seconds`: the first bracket's time)."""
    for line in pasted_lines(lines):
        # "[pod/...] ": kubectl logs --prefix; "][": Python logging's bracketed layout
        if line[:1] == "[" and line[1:2] != "p" and line.find("][", 0, 48) < 0:
            yield line, None, ""  # a plain tuple: a third of a NamedTuple's cost
        else:
            yield unwrap(line, year)


def pasted_lines(lines: Iterable[str]) -> Iterator[str]:
    """The lines as SGLang wrote them where a paste moved their ends or a tool tagged them (a
    paste's decoration, PyTorch's `[rank0]: `, taken off): a line holding several
    is split at SGLang's prefixes (`split_joined`) and a traceback on one line at its frames
    (`split_traceback`); a batch or retraction line that a terminal or an editor cut at its
    width is joined with its pieces (`_Pieces`), as is a traceback's frame cut inside its file
    name or line number (`File "...` with no `", line N` after it: the pieces after it are
    joined while that makes the frame whole)."""
    pieces = _Pieces()
    held = pieces.held
    cut = _Cut()
    frame = cut.held  # a line cut at a terminal's width, and the pieces after it
    decoration = _Decoration()
    for raw in lines:
        if raw[:1] in _DECORATED:  # a paste's decoration, once a line showed it
            raw = decoration.strip(raw)
        # as most are: a whole batch line, no other prefix in it, no piece held, not cut
        if (
            "#queue-req: " in raw
            and not held
            and not frame
            and raw.find("[", 1) < 0
            and len(raw) != pieces.width
        ):
            yield raw
            continue
        if raw[1:2] == "r" and (tag := _TORCH_RANK.match(raw)) is not None:
            raw = raw[tag.end() :]  # PyTorch's rank tag: the line its rank wrote
        joined = split_joined(raw) if raw.find("[", 1) > 0 else (raw,)
        framed = 'File "' in raw
        if framed and raw.find('File "', 1) > 0:  # a traceback whose newlines were lost
            joined = [piece for line in joined for piece in split_traceback(line)]
        for line in joined:
            if frame:
                if cut.continues(line):
                    frame.append(line)
                    if len(line) < len(frame[0]) or len(frame) > _PIECES:
                        yield from cut.flush()
                    continue
                yield from cut.flush()
            if (framed or cut.width) and cut.starts(line):
                frame.append(line)
                continue
            if held:
                if line[:1] not in _NOT_A_PIECE and line[:2] != "  " and len(held) <= _PIECES:
                    yield from pieces.add(line)
                    continue
                yield from pieces.flush()
            if (
                line[:1] == "["
                and line.startswith(_CUT_OPENERS, line.find("] ", 1, 100) + 2)
                and (len(line) == pieces.width or not _COMPLETE.search(line))
            ):
                held.append(line)
                continue
            yield line
    yield from cut.flush()
    yield from pieces.flush()


class _Cut:
    """A line a terminal cut at its width, and the pieces after it: a traceback's frame (`File
    "` in a line at least `_WIDTH` long whose `", line N, in name` is missing or may go on),
    or, once a frame was joined, any line as long as that one was (the terminal's width: an
    exception's message, SGLang's own lines). Pieces are joined where they make the frame whole
    or the width is known; else each is kept as it came."""

    __slots__ = ("held", "width")

    def __init__(self) -> None:
        self.held: list[str] = []
        self.width = 0  # the width a frame was cut at, once one was joined

    def starts(self, line: str) -> bool:
        """Whether `line` may be the first piece of a cut line."""
        if self.width and len(line) == self.width:
            return True
        return len(line) >= _WIDTH and 'File "' in line and _CUT_FRAME.search(line) is not None

    def continues(self, line: str) -> bool:
        """Whether `line` is the next piece: the pieces so far as long as each other, and
        `line` no longer and no line of its own (a frame's code is indented by four, a frame
        by two, an exception's line opens with its name)."""
        held = self.held
        if not line or len(line) > len(held[0]) or any(len(p) != len(held[0]) for p in held):
            return False
        if line[:2] in ("  ", "\t") or line.lstrip().startswith(_LINE_STARTS):
            return False
        return _EXCEPTION_AFTER.match(" " + line, 1) is None

    def flush(self) -> list[str]:
        """The held pieces, emptied: joined where they make one frame or a line of the known
        width, else each as it came."""
        held = self.held[:]
        self.held.clear()
        if len(held) < 2:
            return held
        whole = "".join(held)
        if _WHOLE_FRAME.match(whole, max(0, whole.rfind('File "', 0, len(held[0])))):
            self.width = self.width or len(held[0])
            return [whole]
        return [whole] if self.width and len(held[0]) == self.width else held


class _Pieces:
    """A batch or retraction line cut at a terminal's width, and the pieces after it. Every such
    line of every version holds `#queue-req: N` or `#retracted_reqs: N` (the message catalogue
    says), so the line is cut where it lacks them, or where it is as long as a line cut before
    (the width); pieces are joined only where the joined line holds them, and a piece as long
    as the first may have more after it."""

    __slots__ = ("held", "width")

    def __init__(self) -> None:
        self.held: list[str] = []
        self.width = 0  # the width lines were cut at, once one was joined

    def add(self, piece: str) -> list[str]:
        self.held.append(piece)
        return [] if len(piece) == len(self.held[0]) else self.flush()

    def flush(self) -> list[str]:
        held = self.held[:]
        self.held.clear()
        if len(held) > 1 and _COMPLETE.search(whole := "".join(held)):
            self.width = len(held[0])
            return [whole]
        return held


def split_joined(line: str) -> list[str]:
    """A line holding several of SGLang's (a paste whose newlines were lost), split at each of
    SGLang's prefixes inside it; a request log's line (its prompt is the client's) is kept whole,
    and a bracket with nothing after it (a wrapper's dated one) stays with the line it opens."""
    cuts = [found.span() for found in _INNER_PREFIX.finditer(line, 1)]
    # behind a wrapper ("svc-1  | <stamp> [...] "), the first prefix is the line's own; not
    # behind an exception's words (a line of its own before SGLang's: "CUDA Error: ... [...]")
    own, wrapped = 0, 0
    if line[:1] != "[" and cuts and _FOREIGN_NOT.search(line, 0, cuts[0][0]) is None:
        wrapped, own = cuts.pop(0)
    if not cuts:
        return [line]
    first = _FIRST_PREFIX.match(line, own)
    if first is not None and line.startswith(REQUEST_LOG, first.end()):
        return [line]
    parts, start, head = [], 0, own
    wrapper: re.Pattern[str] | None | bool = bool(wrapped)  # True: not yet made
    for cut, after in cuts:
        if _BRACKETS_ONLY.fullmatch(line, head, cut):  # nothing said since the last prefix
            head = after
            continue
        # the next line's own wrapper before its prefix goes with it
        if wrapper is True:
            wrapper = _repeated(line[:wrapped].strip())
        found = wrapper.search(line, head, cut) if isinstance(wrapper, re.Pattern) else None
        if found is not None:
            parts.append(line[start : found.start()].rstrip())
            start, head = found.start(), after
            continue
        parts.append(line[start:cut])
        start = head = after
    parts.append(line[start:])
    return parts


def _repeated(wrapper: str) -> re.Pattern[str] | None:
    """The wrapper a joined line opens with (`svc-1  |`, a journal's `Aug 08 12:10:01 host
    python3[4242]:`, an RFC 3339 stamp) as it repeats before each line it held: the same text,
    its numbers free, at the end of the text before the next prefix."""
    if not wrapper or len(wrapper) > _FOREIGN_CHARS:
        return None
    shape = re.sub(r"\d+", r"\\d{1,12}", re.escape(wrapper))
    return re.compile(rf"(?:(?<=\s)|^){shape}[ \t]*$")


def split_traceback(line: str) -> list[str]:
    """A traceback pasted on one line (its newlines lost), split as Python printed it: the text
    before it, each frame (`  File "...", line N, in f`), the frame's code, and the exception
    after the last code it shows; chained tracebacks likewise (`_TRACEBACK_CUT`). A line that
    is one frame (whole or cut) or holds none is returned whole."""
    lead = len(line) - len(line.lstrip())
    cuts = [cut.start() for cut in _TRACEBACK_CUT.finditer(line, lead + 1) if cut.start() > lead]
    if not cuts and _CODE_AFTER.match(line, lead) is None:
        return [line]
    if _FRAME_AT.search(line, lead) is None:
        return [line]
    out: list[str] = []
    for start, end in zip([0, *cuts], [*cuts, len(line)], strict=True):
        piece = line[start:end].strip()
        frame = _FRAME_AT.match(piece)
        if frame is None:
            if piece:
                out.append(line[start:end].rstrip() if start == 0 else piece)
            continue
        out.append("  " + frame.group())
        rest = piece[frame.end() :]
        raised = _EXCEPTION_AFTER.search(rest)
        code, last = (rest[: raised.start()], rest[raised.start() :]) if raised else (rest, "")
        if code.strip():
            out.append("    " + code.strip())
        if last.strip():
            out.append(last.strip())
    return out


def unwrap(line: str, year: int | None = None) -> Unwrapped:
    """`line` with every wrapper taken off; `year` dates stamps that print none (journalctl's
    `short`): without it they give no time."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if (
        line.startswith("[")
        and line.find("] [", 0, 48) < 0
        and line.find("][", 0, 48) < 0
        and not line.startswith("[pod/")
    ):
        return Unwrapped(line, None, "")  # SGLang's own line, as most are: the short path
    if "&" in line and _ENTITY.search(line):  # copied from a page's HTML source
        line = html.unescape(line)
    ts: float | None = None
    stream = ""
    for _ in range(_DEPTH):
        layer = _layer(line, year)
        if layer is None:
            break
        line, layer_ts, layer_stream = layer
        ts = layer_ts if ts is None else ts
        stream = stream or layer_stream
    return Unwrapped(line, ts, stream)


def _layer(line: str, year: int | None) -> Unwrapped | None:
    """The outermost wrapper taken off, or None when `line` has none."""
    first = line[:1]
    if first == "[":
        return _bracket(line)
    if first == "(":
        return _ray(line)
    if first == "{":
        return _json(line) if len(line) <= MAX_JSON_CHARS else None
    if first == '"':
        return _json_string(line)
    if first.isdigit():
        return _stamped(line) or _foreign(line) or _pasted(line)
    if first.isalpha():
        return _journal_short(line, year) or _severity(line) or _compose(line) or _foreign(line)
    if first in " \t>-*+`\u2022":
        return _pasted(line)
    return None


def _json_string(line: str) -> Unwrapped | None:
    """A line held as a JSON string, as a notebook's saved outputs (`.ipynb`: `"text": [...]`)
    or a JSON array of lines keep it: `"[2025-07-11 07:11:19] Decode batch. ...\\n",` read as
    the string it holds, without its newline."""
    match = _JSON_STRING.match(line)
    if match is None:
        return None
    try:
        text = json.loads(match.group(1))
    except ValueError:
        return None
    return Unwrapped(text.rstrip("\r\n"), None, "") if isinstance(text, str) else None


def _pasted(line: str) -> Unwrapped | None:
    """A paste's decoration taken off (`_PASTE`): after quote marks whatever follows, else only
    before the start of a log line (`_PASTED_START`); backticks closing the line go with it."""
    match = _PASTE.match(line)
    if match is None or match.end() == 0:
        return None
    rest = line[match.end() :]
    if not match.group(2) and not _PASTED_START.match(rest):
        return None
    if match.group(6):
        rest = rest.rstrip().rstrip("`")
    return Unwrapped(rest, None, "")


_DECORATED = frozenset(" \t>-*+\u2022`0123456789")  # what a decorated line opens with


class _Decoration:
    """What a paste put before every line, once one line shows it before a log line's own
    start (`_PASTED_START`) or a log tool's wrapper (`_layer`): the same indentation, quote
    marks, bullet, or a line number with the same gap after it (right-aligned: its indentation
    may shrink as it grows). Taken off every line after that carries it, whatever follows: a
    traceback's frame and code, a message no opener names, a wrapped line (`    svc-1  | ...`),
    which alone keep their decoration (a paste's 4-space code block)."""

    __slots__ = ("pattern",)

    def __init__(self) -> None:
        self.pattern: re.Pattern[str] | None = None

    def strip(self, line: str) -> str:
        """`line` without the paste's decoration (learned from it where none is yet)."""
        pattern = self.pattern
        if pattern is None:
            self.pattern = pattern = _decoration_of(line)
            if pattern is None:
                return line
        found = pattern.match(line)
        return line[found.end() :] if found is not None else line


def _decoration_of(line: str) -> re.Pattern[str] | None:
    """The decoration `line` shows before a log line's own start, as a pattern for the lines
    after it (None: it shows none)."""
    match = _PASTE.match(line)
    if match is None or match.end() == 0:
        return None
    rest = line[match.end() :]
    if not _PASTED_START.match(rest) and _layer(rest, None) is None:  # nor a wrapper's line
        return None
    indent, quotes, bullet, number, gap, ticks = match.groups()
    if not (indent or quotes or bullet or number):
        return None  # backticks alone: one inline-code span, not a paste of lines
    if number:
        head = rf"[ \t]{{0,{len(indent) + len(number)}}}\d{{1,7}}"
        return re.compile(head + re.escape(gap) + re.escape(quotes or "") + re.escape(ticks))
    return re.compile(re.escape(indent + quotes + (bullet or "") + ticks))


def _foreign(line: str) -> Unwrapped | None:
    """A prefix no layer knows before one of SGLang's own messages (`_OPENERS`): taken off, its
    time kept as SGLang's bracket (`[date time]`, or `[time]` where it prints no year: dated
    from the file, as SGLang's own time-only stamps are)."""
    found = _OPENERS.search(line, 0, _FOREIGN_CHARS + 40)
    if found is None or not 0 < found.start() <= _FOREIGN_CHARS:
        return None
    prefix, rest = line[: found.start()], line[found.start() :]
    if prefix[-1] not in " \t]|:-" or _FOREIGN_NOT.search(prefix):
        return None
    clock = _FOREIGN_CLOCK.search(prefix)
    if clock is None:
        return Unwrapped(rest, None, "") if _FOREIGN_LEVEL.search(prefix) else None
    hour, minute, second, fraction = clock.groups()
    day = _FOREIGN_DAY.search(prefix)
    if day is None:
        return Unwrapped(f"[{hour}:{minute}:{second}] {rest}", None, "")
    stamp = f"{day.group(1)}-{day.group(2)}-{day.group(3)}"
    when = f"{hour}:{minute}:{second}"
    return Unwrapped(f"[{stamp} {when}] {rest}", _utc(stamp, when, fraction), "")


def _ray(line: str) -> Unwrapped | None:
    """Ray's `(ActorName pid=123[, ip=...]) ` before a worker's line; the actor and pid name the
    stream (several engines interleave in one driver's output)."""
    match = _RAY.match(line)
    if match is None:
        return None
    rest = _RAY_REPEATED.sub("", line[match.end() :])
    return Unwrapped(rest, None, match.group(1))


def _bracket(line: str) -> Unwrapped | None:
    """A dated bracket before SGLang's own, Python logging's bracketed layout, or `kubectl
    logs --prefix`."""
    if match := _PYLOG_BRACKETS.match(line):
        day, clock, fraction = match.groups()
        rest = line[match.end() :]
        return Unwrapped(f"[{day} {clock}] {rest}", _utc(day, clock, fraction), "")
    if match := _OUTER_STAMP.match(line):
        day, clock, fraction = match.groups()
        return Unwrapped(line[match.end() :], _utc(day, clock, fraction), "")
    if match := _KUBECTL_PREFIX.match(line):
        return Unwrapped(line[match.end() :], None, match.group(1))
    return None


def _stamped(line: str) -> Unwrapped | None:
    """A line that opens with digits: an RFC 3339 stamp (kubectl, docker -t, CRI, journalctl
    short-iso), journalctl short-unix, or SGLang's prefix without its "["."""
    if match := _RFC3339.match(line):
        day, clock, fraction, zone = match.groups()
        ts = _utc(day, clock, fraction, zone)
        rest = line[match.end() :]
        if cri := _CRI.match(rest):
            return Unwrapped(rest[cri.end() :], ts, "")
        if labels := _LOKI_LABELS.match(rest):
            stream = _LOKI_STREAM.search(labels.group(1))
            return Unwrapped(rest[labels.end() :], ts, stream.group(1) if stream else "")
        # journalctl's short-iso prints an offset, kubectl, docker and CRI print UTC as "Z"
        if zone not in (None, "Z") and (journal := _JOURNAL.match(rest)):
            return Unwrapped(rest[journal.end() :], ts, journal.group(1))
        return Unwrapped(rest, ts, "")
    if _BRACKET_LOST.match(line):
        return Unwrapped("[" + line, None, "")
    if match := _PYLOG.match(line):
        day, clock, fraction, ranks = match.groups()
        rest = line[match.end() :]
        tags = f" {ranks.strip()}" if ranks else ""
        return Unwrapped(f"[{day} {clock}{tags}] {rest}", _utc(day, clock, fraction), "")
    if (match := _SHORT_UNIX.match(line)) and (journal := _JOURNAL.match(line, match.end())):
        seconds, fraction = match.groups()
        ts = int(seconds) + (float("0." + fraction) if fraction else 0.0)
        return Unwrapped(line[journal.end() :], ts, journal.group(1))
    return None


def _severity(line: str) -> Unwrapped | None:
    """Google Cloud Logging's `SEVERITY <RFC 3339> ` before an entry's text: the stamp's time.
    Every line of a traceback logged line by line carries it, so each is read as the line it
    wraps (its frames and its final exception included)."""
    match = _SEVERITY.match(line)
    if match is None:
        return None
    stamp = _RFC3339.match(line, match.end())
    if stamp is None:
        return None
    day, clock, fraction, zone = stamp.groups()
    return Unwrapped(line[stamp.end() :], _utc(day, clock, fraction, zone), "")


def _journal_short(line: str, year: int | None) -> Unwrapped | None:
    """journalctl's `short` / `short-precise` (`Jan 05 10:00:00[.123456] host unit[pid]: `),
    dated with `year`, or its `short-full` (`Fri 2024-01-05 10:00:00 UTC host unit[pid]: `)."""
    if match := _SHORT_FULL.match(line):
        ts: float | None = _utc(match.group(1), match.group(2), match.group(3))
    elif (match := _SHORT.match(line)) and match.group(1) in _MONTHS:
        ts = _short_ts(match.groups(), year)
    else:
        return None
    journal = _JOURNAL.match(line, match.end())
    if journal is None:
        return None
    return Unwrapped(line[journal.end() :], ts, journal.group(1))


def _short_ts(groups: tuple[str | Any, ...], year: int | None) -> float | None:
    """Unix seconds of a `short` stamp's month, day and time in `year` (None without one)."""
    month, day, hour, minute, second, fraction = groups
    if year is None:
        return None
    try:
        when = datetime(year, _MONTHS.index(month) + 1, int(day), int(hour), int(minute),
                        int(second), tzinfo=timezone.utc)  # fmt: skip
    except ValueError:  # Feb 29 in another year, or a wrong field
        return None
    return when.timestamp() + (float("0." + fraction) if fraction else 0.0)


def _compose(line: str) -> Unwrapped | None:
    """`docker compose logs`' `service-1  | `."""
    match = _COMPOSE.match(line)
    return Unwrapped(line[match.end() :], None, match.group(1)) if match else None


def _json(line: str) -> Unwrapped | None:
    """A JSON record with a message field: its message, time and source."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict):
        return None
    message = next((v for k in _MESSAGE_KEYS if isinstance(v := record.get(k), str)), None)
    if message is None:
        return None
    ts = next((t for k in _TIME_KEYS if (t := _json_time(record.get(k))) is not None), None)
    return Unwrapped(message.rstrip("\r\n"), ts, _json_stream(record))


def _json_stream(record: dict[str, Any]) -> str:
    """The container, pod or unit a record names (also under `kubernetes` or `labels`)."""
    for holder in (record, record.get("kubernetes"), record.get("labels")):
        if isinstance(holder, dict):
            for key in _STREAM_KEYS:
                if isinstance(value := holder.get(key), str) and value:
                    return value
    return ""


def _json_time(value: object) -> float | None:
    """Unix seconds of a JSON time: RFC 3339 text, or a number of s, ms, µs or ns since 1970."""
    if isinstance(value, str):
        if not value.isdigit():
            match = _ISO.match(value)
            return _utc(*match.groups()) if match else None
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    seconds = float(value)
    while seconds > 1e11:  # ms, µs (journald) or ns: to seconds
        seconds /= 1000.0
    return seconds if seconds > 0 else None


def _utc(day: str, clock: str, fraction: str | None, zone: str | None = None) -> float | None:
    """Unix seconds of a date, a time, a fraction and an offset (none: read as UTC)."""
    try:
        days = date(int(day[:4]), int(day[5:7]), int(day[8:10])).toordinal() - _EPOCH_DAY
    except ValueError:
        return None
    ts = days * 86400.0 + int(clock[:2]) * 3600 + int(clock[3:5]) * 60 + int(clock[6:8])
    if fraction:
        ts += float("0." + fraction)
    if zone and zone != "Z":  # "+01:00" or "+0100": local time that far ahead of UTC
        offset = int(zone[1:3]) * 3600 + int(zone[-2:]) * 60
        ts += -offset if zone[0] == "+" else offset
    return ts
