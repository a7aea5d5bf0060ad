"""Each test transfer's flows from a capture: flows go to the transfer they overlap in time
and match in direction; a capture that cannot start says why (no network, no root)."""

from __future__ import annotations

import os

import pytest

from tcpwizard.measure.farends.interface import Progress
from tcpwizard.measure.observe import tsg
from tcpwizard.measure.observe.tsg_transfers import (
    Span,
    TransferKey,
    TransferRecorder,
    assign_flows,
)

HERE, FAR = "192.0.2.10", "198.51.100.7"


def _flow(
    t0: float, seconds: float, src: str, dst: str, nbytes: int, up: bool = True
) -> tsg.TsgSeries:
    """A flow of `nbytes` from src to dst; the far end (serve, port 5301) receives it when
    `up`, else sends it."""
    ports = ("40000", "5301") if up else ("5301", "40000")
    return tsg.TsgSeries(
        flow=f"{src}:{ports[0]} > {dst}:{ports[1]}",
        src=src,
        dst=dst,
        t0=t0,
        data=((0.0, 0, nbytes),),
        retransmits=(),
        acks=((seconds, nbytes),),
        window=((seconds, nbytes + 65536),),
        bytes=nbytes,
        duration_s=seconds,
        window_scale=7,
    )


def _autotune_both_ways(up: Span, down: Span) -> dict[TransferKey, Span]:
    """When autotune's upload and its download ran (the upload listed first)."""
    return {("autotune", "up"): up, ("autotune", "down"): down}


def test_flows_go_to_the_transfer_they_overlap_in_their_direction() -> None:
    spans: dict[TransferKey, Span] = {
        ("autotune", "up"): (100.0, 105.0),
        ("untuned", "up"): (95.0, 99.5),
        ("autotune", "down"): (106.0, 110.0),
    }
    up_1 = _flow(100.1, 4.8, HERE, FAR, 5_000_000)
    up_2 = _flow(100.1, 4.8, HERE, FAR, 9_000_000)  # a second stream of the same mode
    untuned = _flow(94.9, 4.5, HERE, FAR, 700_000)  # starts before its first progress
    down = _flow(106.2, 3.5, FAR, HERE, 8_000_000, up=False)
    stray = _flow(120.0, 2.0, HERE, FAR, 1_000_000)  # after every transfer
    got = assign_flows([up_1, up_2, untuned, down, stray], spans, FAR, 5301)
    assert [(t.mode, t.direction) for t in got] == [
        ("untuned", "up"),
        ("autotune", "up"),
        ("autotune", "down"),
    ]  # in the order they ran
    flows = {(t.mode, t.direction): t.flows for t in got}
    assert flows["autotune", "up"] == (up_2, up_1)  # largest first
    assert flows["untuned", "up"] == (untuned,)
    assert flows["autotune", "down"] == (down,)


def test_a_download_is_never_taken_for_an_upload() -> None:
    spans = _autotune_both_ways((100.0, 105.0), (106.0, 110.0))
    down_early = _flow(101.0, 3.0, FAR, HERE, 5_000_000, up=False)  # overlaps only the upload
    got = assign_flows([down_early], spans, FAR, 5301)
    assert all(t.flows == () for t in got)


def test_over_loopback_without_a_port_time_alone_decides() -> None:
    spans = _autotune_both_ways((100.0, 105.0), (106.0, 110.0))
    lo = "127.0.0.1"
    up, down = _flow(100.0, 5.0, lo, lo, 10), _flow(106.0, 4.0, lo, lo, 10, up=False)
    got = {(t.mode, t.direction): t.flows for t in assign_flows([down, up], spans, lo, None)}
    assert got == {("autotune", "up"): (up,), ("autotune", "down"): (down,)}


def test_over_loopback_the_far_ends_port_keeps_both_ways_at_once_apart() -> None:
    # check --quick: the upload and the download run at the same time.
    spans = _autotune_both_ways((100.1, 102.1), (100.0, 102.0))
    lo = "127.0.0.1"
    up, down = _flow(100.0, 2.0, lo, lo, 10), _flow(100.0, 2.0, lo, lo, 20, up=False)
    got = assign_flows([down, up], spans, lo, 5301)
    assert [(t.mode, t.direction, t.flows) for t in got] == [
        ("autotune", "up", (up,)),  # listed first though the download started first
        ("autotune", "down", (down,)),
    ]


def test_recorder_notes_each_transfer_from_its_first_to_its_last_update() -> None:
    rec = TransferRecorder(FAR, 5301, "--capture")
    for phase in ("start", "sample", "done"):
        rec.note(Progress("autotune", "up", phase, 0.0, 0, 0.0, 1.0, None))  # type: ignore[arg-type]
    first, last = rec.spans["autotune", "up"]
    assert first <= last and list(rec.spans) == [("autotune", "up")]


def test_a_capture_that_cannot_start_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with TransferRecorder(FAR, 5301, "--capture") as rec:
        rec.note(Progress("autotune", "up", "start", 0.0, 0, 0.0, 1.0, None))
    result = rec.result()
    assert result.transfers == ()
    assert result.error == "--capture captures the transfers with tcpdump: needs root"
