"""`check --pcap` without a lab: captures written here with scapy (a window-limited flow,
the same without its handshake, broken files), the rules over constructed flows, and the
text/JSON formats (their golden files: tests/test_golden_documents.py)."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP
from scapy.utils import PcapWriter

from tcpwizard.advice.capture import CaptureReport, judge_capture, judge_direction
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode
from tcpwizard.main import main
from tcpwizard.measure.observe.capture import (
    CaptureSummary,
    FlowDirection,
    SynOptions,
    read_capture,
)
from tcpwizard.output import capture_json, capture_text
from tests.capture_data import flow, lossy_flow
from tests.schemas import schema_path, valid_document

SCHEMA_FILE = schema_path("capture")
A, B = "198.18.0.1", "198.18.0.2"  # benchmark range: no real host here
MSS, RTT_S, WINDOW = 1448, 0.040, 16 * 1448  # a 23 KB window: ~4.6 Mbit/s at 40 ms


def handshake_packets(t: float, b_scale: int) -> list[IP]:
    """A's SYN at t (window scale 7) and B's SYN-ACK one RTT later (scale `b_scale`)."""
    opts = [("MSS", 1460), ("SAckOK", b""), ("WScale", 7)]
    syn = IP(src=A, dst=B) / TCP(sport=40000, dport=5201, flags="S", seq=999, options=opts)
    opts_b = [("MSS", 1460), ("SAckOK", b""), ("WScale", b_scale)]
    syn_ack = IP(src=B, dst=A) / TCP(
        sport=5201, dport=40000, flags="SA", seq=4999, ack=1000, options=opts_b
    )
    syn.time, syn_ack.time = t, t + RTT_S
    return [syn, syn_ack]


def window_limited_capture(path: Path, handshake: bool = True, rounds: int = 60) -> None:
    """A sends to B; B offers WINDOW (scale 2) and acks each window one RTT later: A fills
    the window every round and waits."""
    pkts = []
    t = 1000.0

    def add(p: IP, when: float) -> None:
        p.time = when
        pkts.append(p)

    if handshake:
        pkts += handshake_packets(t, b_scale=2)
        t += RTT_S
    seq = 1000
    for _ in range(rounds):
        for i in range(WINDOW // MSS):
            data = TCP(sport=40000, dport=5201, flags="PA", seq=seq, ack=5000) / (b"x" * MSS)
            add(IP(src=A, dst=B) / data, t + i * 1e-4)
            seq += MSS
        t += RTT_S
        ack = TCP(sport=5201, dport=40000, flags="A", seq=5000, ack=seq, window=WINDOW >> 2)
        add(IP(src=B, dst=A) / ack, t)
    with PcapWriter(str(path), linktype=101, sync=True) as w:
        for p in pkts:
            w.write(p)


def test_window_limited_capture_is_the_receivers_window(tmp_path: Path) -> None:
    path = tmp_path / "wl.pcap"
    window_limited_capture(path)
    summary = read_capture(str(path))
    (d,) = summary.directions
    assert (d.sender, d.receiver, d.handshake, d.scaling) == (A, B, True, True)
    assert d.receiver_syn is not None and d.receiver_syn.wscale == 2
    assert d.max_window == WINDOW  # the raw field times 2**2
    assert d.rtt_min_ms == pytest.approx(40, abs=2) and d.retransmits == 0
    assert d.window_full_share > 0.5
    diag = judge_direction(d, lambda addr: addr == A)
    assert (diag.verdict.limiting_factor, diag.verdict.host_to_fix) == ("receiver-window", "peer")
    assert diag.fixes[0].key == "net.ipv4.tcp_rmem" and diag.fixes[0].host == "peer"


def test_without_the_handshake_windows_are_read_unscaled(tmp_path: Path) -> None:
    path = tmp_path / "mid.pcap"
    window_limited_capture(path, handshake=False)
    (d,) = read_capture(str(path)).directions
    assert d.handshake is False and d.scaling is None
    assert d.max_window == WINDOW >> 2  # the scale is unknown without the SYNs
    v = judge_direction(d, lambda _a: False).verdict
    assert any("no handshake" in e for e in v.evidence)


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["check", *args], Context(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def test_cli_text_and_exit_code(tmp_path: Path) -> None:
    path = tmp_path / "wl.pcap"
    window_limited_capture(path)
    code, out, err = _cli("--pcap", str(path))
    assert code == ExitCode.WARNING and err == ""
    assert "Limiting factor: receiver-window — fix the far end" in out


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"this is not a capture at all, just text\n" * 3, "not a pcap or pcapng capture"),
        (None, "cut short"),
        (b"", "not a pcap or pcapng capture"),
        ("header", "holds no packets"),
    ],
    ids=["garbage", "truncated", "empty", "no-packets"],
)
def test_bad_files_are_one_line_exit_3(
    tmp_path: Path, content: bytes | str | None, why: str
) -> None:
    path = tmp_path / "bad.pcap"
    if content is None:
        window_limited_capture(path, rounds=3)
        raw = path.read_bytes()
        path.write_bytes(raw[: len(raw) - 700])  # the last record cut in the middle
    elif content == "header":
        with PcapWriter(str(path), linktype=101, sync=True) as w:
            w.write_header(None)
    else:
        assert isinstance(content, bytes)
        path.write_bytes(content)
    code, out, err = _cli("--pcap", str(path), "--json")
    assert code == ExitCode.UNKNOWN
    (line,) = err.strip().splitlines()
    assert line.startswith(f"tcpwizard: error: {path}") and why in line, line
    assert json.loads(out)["exit_code"] == 3  # --json still prints a document


def test_missing_file(tmp_path: Path) -> None:
    code, _, err = _cli("--pcap", str(tmp_path / "nope.pcap"))
    assert code == ExitCode.UNKNOWN and "nope.pcap" in err


def _factor(f: FlowDirection) -> tuple[str, str | None]:
    v = judge_direction(f, lambda a: a == "10.0.0.1").verdict
    return v.limiting_factor, v.host_to_fix


def test_rules() -> None:
    assert _factor(flow()) == ("receiver-window", "peer")
    assert _factor(flow(zero_windows=12, zero_window_s=1.0)) == ("application", "peer")
    unscaled = flow(
        scaling=False, receiver_syn=SynOptions(1460, None, True, True, 65535), max_window=65535
    )
    assert _factor(unscaled) == ("window-scaling", "peer")
    free = flow(window_full_share=0.0, max_window=6_000_000, window_p50=6_000_000)
    assert _factor(free) == ("sender-buffer", "local")
    assert _factor(dataclasses.replace(free, rtt_p50_ms=80.0)) == ("path-capacity", None)
    assert _factor(dataclasses.replace(free, idle_share=0.6)) == ("application", "local")
    # The window full and most data acknowledged with the right edge still: unread data,
    # the reader; with the edge moving it is the buffer's size.
    assert _factor(flow(edge_still_share=0.9)) == ("application", "peer")
    assert _factor(flow(edge_still_share=0.1)) == ("receiver-window", "peer")
    # The median near the minimum but a queue at times (p90 +10 ms at 50 ms): the sender had
    # more than the BDP in flight, so its buffer is not the limit.
    at_times = dataclasses.replace(free, rtt_p50_ms=52.0, rtt_p90_ms=60.5)
    assert _factor(at_times) == ("path-capacity", None)
    assert _factor(dataclasses.replace(free, rtt_p90_ms=50.9)) == ("sender-buffer", "local")
    assert _factor(lossy_flow()) == ("congestion", "local")


def report() -> CaptureReport:
    summary = CaptureSummary(
        "upload.pcap",
        16_006,
        16_006,
        0,
        (101,),
        5.4,
        (flow(), flow(sender_port=40002, bytes=300_000, rate_mbps=0.5, window_full_share=0.0)),
    )
    return judge_capture(summary, lambda a: a == "10.0.0.1")


def test_text() -> None:
    out = io.StringIO()
    capture_text.render(report(), out)
    assert "Other flows:" in out.getvalue()


def test_json_matches_the_schema() -> None:
    out = io.StringIO()
    capture_json.render(report(), ExitCode.WARNING, out)
    doc = valid_document(out.getvalue(), "capture")
    assert doc["diagnosis"]["verdict"]["limiting_factor"] == "receiver-window"


def test_schema_file_is_current() -> None:
    assert SCHEMA_FILE.read_text() == capture_json.schema_text(), (
        "run `python -m tcpwizard.output.capture_json docs/capture.schema.json` and commit"
    )


def sack_recovery_capture(path: Path) -> float:
    """A sends a segment per millisecond (one rate, no faster); B acks each 20 ms later. One
    segment is lost and resent 100 ms later: until it arrives B's ACKs carry the hole's edge
    and SACK what came after it. Returns the rate the data arrived at, Mbit/s."""
    pkts = []
    t0, gap, delay, lost = 1000.0, 1e-3, 0.020, 100

    def add(p: IP, when: float) -> None:
        p.time = when
        pkts.append(p)

    opts = [("MSS", 1460), ("SAckOK", b""), ("WScale", 7)]
    add(IP(src=A, dst=B) / TCP(sport=40000, dport=5201, flags="S", seq=999, options=opts), t0)
    add(IP(src=B, dst=A) / TCP(sport=5201, dport=40000, flags="SA", seq=4999, ack=1000,
                               options=opts), t0 + delay)  # fmt: skip
    start = t0 + 2 * delay
    first = 1000
    hole = first + lost * MSS
    resent_at = start + lost * gap + 0.100
    for i in range(600):
        seq = first + i * MSS
        sent = start + i * gap
        add(IP(src=A, dst=B) / TCP(sport=40000, dport=5201, flags="PA", seq=seq, ack=5000)
            / (b"x" * MSS), sent)  # fmt: skip
        if i == lost:
            continue
        arrived = sent + delay
        ack, sack = seq + MSS, []
        if lost < i and arrived < resent_at + delay:
            ack, sack = hole, [("SAck", (hole + MSS, seq + MSS))]
        elif arrived >= resent_at + delay and i > lost:
            ack = seq + MSS
        add(IP(src=B, dst=A) / TCP(sport=5201, dport=40000, flags="A", seq=5000, ack=ack,
                                   window=4000, options=sack), arrived + delay)  # fmt: skip
    add(IP(src=A, dst=B) / TCP(sport=40000, dport=5201, flags="PA", seq=hole, ack=5000)
        / (b"x" * MSS), resent_at)  # fmt: skip
    last = first + 600 * MSS
    edge = max(s for s in range(first, last, MSS) if start + (s - first) // MSS * gap
               + delay <= resent_at + delay) + MSS  # fmt: skip
    add(IP(src=B, dst=A) / TCP(sport=5201, dport=40000, flags="A", seq=5000, ack=edge,
                               window=4000), resent_at + 2 * delay)  # fmt: skip
    pkts.sort(key=lambda p: float(p.time))
    with PcapWriter(str(path), linktype=101, sync=True) as w:
        for p in pkts:
            w.write(p)
    return MSS * 8 / gap / 1e6


def test_delivered_rate_counts_sacked_bytes_so_a_recovery_is_no_burst(tmp_path: Path) -> None:
    """The cumulative ACK closing a 100 ms hole would credit 100 ms of data to one instant
    (a peak ~1.4x the line over 0.25 s); counting what B SACKed keeps the peak at the rate
    the data arrived."""
    path = tmp_path / "sack.pcap"
    line = sack_recovery_capture(path)
    d = read_capture(str(path)).directions[0]
    assert d.retransmits == 1
    assert 0.9 * line <= d.peak_mbps <= 1.05 * line, (d.peak_mbps, line)


def receiver_side_capture(path: Path, reader_keeps_up: bool, rounds: int = 40) -> None:
    """Taken at B, the receiver: A fills the window B offers once per RTT_S; B acks each
    segment 50 µs after it arrives (its TSval counting up), and A's next round echoes those
    TSvals. A reader that keeps up frees each segment at once (B's right edge moves with
    every ACK); one that does not leaves the edge where it was until it reads, once a round."""
    pkts = []
    t = 1000.0

    def add(p: IP, when: float) -> None:
        p.time = when
        pkts.append(p)

    opts_a = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1, 0)), ("WScale", 7)]
    add(IP(src=A, dst=B) / TCP(sport=40000, dport=5201, flags="S", seq=999, options=opts_a), t)
    opts_b = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1, 1)), ("WScale", 2)]
    syn_ack = TCP(sport=5201, dport=40000, flags="SA", seq=4999, ack=1000, options=opts_b)
    add(IP(src=B, dst=A) / syn_ack, t + 50e-6)
    t += RTT_S
    seq, tsval, n = 1000, 2, WINDOW // MSS
    echo = [1] * n
    for _ in range(rounds):
        edge = seq + WINDOW  # B's right edge as this round begins
        for i in range(n):
            at = t + i * 1e-4
            ts = [("Timestamp", (100, echo[i]))]
            data = TCP(sport=40000, dport=5201, flags="PA", seq=seq, ack=5000, options=ts)
            add(IP(src=A, dst=B) / (data / (b"x" * MSS)), at)
            seq += MSS
            right = seq + WINDOW if reader_keeps_up else edge
            ack = TCP(sport=5201, dport=40000, flags="A", seq=5000, ack=seq,
                      window=(right - seq) >> 2, options=[("Timestamp", (tsval, 100))])  # fmt: skip
            add(IP(src=B, dst=A) / ack, at + 50e-6)
            echo[i] = tsval
            tsval += 1
        t += RTT_S
    with PcapWriter(str(path), linktype=101, sync=True) as w:
        for p in pkts:
            w.write(p)


@pytest.mark.parametrize(
    ("keeps_up", "factor"), [(True, "receiver-window"), (False, "application")]
)
def test_a_capture_at_the_receiver_sees_the_path_and_its_reader(
    tmp_path: Path, keeps_up: bool, factor: str
) -> None:
    """At the receiver, data-to-ACK is only B's ACK delay: the round trip comes from A's
    data echoing B's timestamps, the sender's idle time from silences in the data, and a
    full window from data reaching B's right edge."""
    path = tmp_path / "at-b.pcap"
    receiver_side_capture(path, keeps_up)
    d = read_capture(str(path)).directions[0]
    assert d.rtt_min_ms == pytest.approx(RTT_S * 1e3, rel=0.02)
    assert d.downstream_share is not None and d.downstream_share < 0.01
    assert d.idle_share < 0.1
    assert d.window_full_share >= 0.9
    assert (d.edge_still_share >= 0.9) == (not keeps_up)
    v = judge_direction(d, lambda a: a == B).verdict
    assert (v.limiting_factor, v.host_to_fix) == (factor, "local")


def held_ack_capture(path: Path, every: int, rounds: int = 400) -> None:
    """Taken at B: A's segments arrive every 1.2 ms (~10 Mbit/s), in order; B acknowledges
    every `every` segments, its window growing with each ACK (the buffer has room)."""
    pkts = []
    t = 1000.0

    def add(p: IP, when: float) -> None:
        p.time = when
        pkts.append(p)

    pkts += handshake_packets(t, b_scale=7)
    t += RTT_S
    seq = 1000
    for i in range(rounds):
        data = TCP(sport=40000, dport=5201, flags="PA", seq=seq, ack=5000) / (b"x" * MSS)
        add(IP(src=A, dst=B) / data, t)
        seq += MSS
        if (i + 1) % every == 0:
            window = (4_000_000 + seq) >> 7
            ack = TCP(sport=5201, dport=40000, flags="A", seq=5000, ack=seq, window=window)
            add(IP(src=B, dst=A) / ack, t + 50e-6)
        t += 1.2e-3
    with PcapWriter(str(path), linktype=101, sync=True) as w:
        for p in pkts:
            w.write(p)


@pytest.mark.parametrize(("every", "held"), [(2, False), (20, True)])
def test_acks_held_back_by_the_receiver_name_its_reader(
    tmp_path: Path, every: int, held: bool
) -> None:
    """A receiver that acknowledges every second segment keeps up; one whose ACKs each
    cover 20 segments that arrived over 23 ms held them for a reader that made no room,
    even with its window open (no zero window, no still right edge)."""
    path = tmp_path / "held.pcap"
    held_ack_capture(path, every)
    d = read_capture(str(path)).directions[0]
    assert d.zero_windows == 0 and d.edge_still_share < 0.1
    assert (d.held_ack_share > 0.9) == held
    assert d.held_ack_share < 0.1 or held
    v = judge_direction(d, lambda a: a == B).verdict
    # B is local; without held ACKs the trickle is A's own (its application sends little).
    assert ((v.limiting_factor, v.host_to_fix) == ("application", "local")) == held
