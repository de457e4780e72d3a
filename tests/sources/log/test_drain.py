"""A log read as it comes: lines cut at the limit and counted, a pipe drained by a thread so its
writer never waits, the oldest lines dropped (and counted) when nobody takes them."""

import os
import threading

from hypothesis import given
from hypothesis import strategies as st
from sglang_tuner.sources.log import drain
from sglang_tuner.sources.log.drain import Drain, LineCutter, decode_lines


def test_lines_come_out_whole_whatever_the_chunks():
    cutter = LineCutter(max_line_bytes=100)
    out = cutter.feed(b"first li") + cutter.feed(b"ne\nsecond\nthi") + cutter.feed(b"rd\n")
    assert out == [b"first line", b"second", b"third"]
    assert cutter.lines_cut == 0


def test_a_line_past_the_limit_is_cut_counted_and_the_next_one_read_whole():
    cutter = LineCutter(max_line_bytes=10)
    out = cutter.feed(b"x" * 25) + cutter.feed(b"y" * 25_000) + cutter.feed(b"z\nnext\n")
    assert out == [b"x" * 10, b"next"]
    assert cutter.lines_cut == 1


@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=20),
       st.integers(1, 50))  # fmt: skip
def test_any_chunking_gives_the_same_lines_each_cut_at_the_limit(lines, chunk):
    data = b"".join(line + b"\n" for line in lines)
    cutter = LineCutter(max_line_bytes=16)
    out = [x for i in range(0, len(data), chunk) for x in cutter.feed(data[i : i + chunk])]
    assert out == [line[:16] for line in lines]
    assert cutter.lines_cut == sum(len(line) > 16 for line in lines)


def test_a_carriage_return_splits_a_line_as_str_splitlines_does():
    assert decode_lines([b"capture 1/3\rcapture 3/3", b"done"]) == [
        "capture 1/3", "capture 3/3", "done",
    ]  # fmt: skip


def test_a_pipe_is_drained_while_nobody_takes_and_its_writer_never_waits(monkeypatch):
    # 8 MiB through a 64 KiB pipe with no take at all: the writer finishes (a thread reads);
    # past the buffer's bound the oldest lines go, counted
    monkeypatch.setattr(drain, "MAX_BUFFER_BYTES", 1024 * 1024)
    read, write = os.pipe()
    source = Drain(lambda: os.dup(read), "test")
    line = b"Decode batch " + b"x" * 1011 + b"\n"  # 1 KiB
    writer = threading.Thread(target=lambda: [os.write(write, line * 64) for _ in range(128)])
    writer.start()
    writer.join(timeout=30)
    os.close(write)
    assert not writer.is_alive()
    for _ in range(3000):  # the last lines read, the end seen
        if source.eof:
            break
        threading.Event().wait(0.01)
    lines = source.take()
    assert 1000 <= len(lines) <= 1024 and source.dropped_lines == 8192 - len(lines)
    assert source.done
    os.close(read)
