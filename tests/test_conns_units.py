"""`conns` without a network: the verdict rules over constructed TCP_INFO observations,
the sampling arithmetic, filters, and what the text/JSON formats say (their golden files:
tests/test_golden_documents.py)."""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Mapping
from dataclasses import replace

import pytest

from tcpwizard.advice.conns import judge
from tcpwizard.conns_report import ConnFilter, OwnerKey, connections_report
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, UsageError
from tcpwizard.main import main
from tcpwizard.measure.observe.conns import ConnKey, ConnObservation, DiagRecord, Owner, observe
from tcpwizard.measure.observe.tcpinfo import TcpInfo
from tcpwizard.output import conns_json, conns_text
from tests.conns_data import IPERF3, SYSCTLS, obs, report
from tests.schemas import schema_path, valid_document

SCHEMA_FILE = schema_path("conns")


def _factor(o: ConnObservation) -> tuple[str | None, str | None]:
    v = judge(o, SYSCTLS).verdict
    return (v.limiting_factor, v.host_to_fix) if v else (None, None)


def test_a_window_with_room_to_spare_at_the_idle_rtt_did_not_hold_the_sender() -> None:
    """A healthy upload at 189 Mbit/s x 250 ms met the peer's 20 MB window (6.7 x what the
    rate needs at the idle RTT) while its recovery stretched the round trip: the window did
    not hold it. The same stalls against a window the rate fills at the idle RTT did."""
    roomy = obs(
        rwnd_limited=0.3, send_mbps=189.0, rtt_ms=320.0, min_rtt_ms=250.0,
        snd_wnd_max=20_971_520, snd_wnd_min=20_971_520,
    )  # fmt: skip
    assert _factor(roomy)[0] != "receiver-window"
    # 6 MB at 250 ms carries 192 Mbit/s: under 189 / 0.85, the window held it.
    tight = replace(roomy, snd_wnd_max=6_000_000, snd_wnd_min=6_000_000)
    assert _factor(tight) == ("receiver-window", "peer")


def test_idle_connection_has_no_verdict() -> None:
    d = judge(obs(send_mbps=0.0, recv_mbps=0.0))
    assert d.role == "idle" and d.verdict is None and d.fixes == ()


def test_steady_window_filled_each_rtt_is_the_peers_receive_window() -> None:
    d = judge(obs(rwnd_limited=0.3, busy=0.9), SYSCTLS)
    assert d.verdict is not None
    assert (d.verdict.limiting_factor, d.verdict.host_to_fix) == ("receiver-window", "peer")
    keys = {(f.key, f.host) for f in d.fixes}
    assert ("net.ipv4.tcp_rmem", "peer") in keys and ("setsockopt:SO_RCVBUF", "peer") in keys
    # Sized for 1 Gbit/s at the 50 ms RTT: 2 x 6.3 MB rounded to a power of two.
    rmem = next(f for f in d.fixes if f.key == "net.ipv4.tcp_rmem")
    assert rmem.value == "4096 131072 16777216"


def test_zero_window_is_the_receiving_application() -> None:
    assert _factor(obs(rwnd_limited=0.6, busy=0.8, zero_window=True)) == ("application", "peer")


def test_window_opening_wider_than_used_is_a_slow_reader() -> None:
    o = obs(rwnd_limited=0.5, busy=0.7, send_mbps=4.0, snd_wnd_min=8_000, snd_wnd_max=3_000_000)
    assert _factor(o) == ("application", "peer")


def test_unscaled_window_is_window_scaling() -> None:
    o = obs(rwnd_limited=0.5, snd_wnd_max=65_535, snd_wnd_min=65_535, window_scaling=False)
    assert _factor(o) == ("window-scaling", "both")


def test_send_buffer_stalls_are_sender_buffer_here() -> None:
    d = judge(obs(sndbuf_limited=0.5, busy=0.8, sndbuf=4_194_304), SYSCTLS)
    assert d.verdict is not None and d.verdict.limiting_factor == "sender-buffer"
    assert d.fixes[0].key == "net.ipv4.tcp_wmem" and d.fixes[0].host == "local"
    assert d.fixes[0].value == "4096 16384 16777216"


def test_fixed_small_send_buffer_is_the_applications_setsockopt() -> None:
    d = judge(obs(sndbuf_limited=0.5, busy=0.8, sndbuf=131_072), SYSCTLS)
    assert [f.key for f in d.fixes] == ["setsockopt:SO_SNDBUF"]
    assert any("fixed SO_SNDBUF" in e for e in d.verdict.evidence)  # type: ignore[union-attr]


def test_sender_with_nothing_to_send_is_the_application() -> None:
    assert _factor(obs(busy=0.2)) == ("application", "local")


def test_reno_at_the_mathis_bound_is_congestion() -> None:
    o = obs(congestion_control="reno", retransmits=20, segs_out=2000, send_mbps=3.0)
    d = judge(o, SYSCTLS)
    assert d.verdict is not None and d.verdict.limiting_factor == "congestion"
    assert d.fixes[0].value == "bbr"


def test_reno_losing_into_a_standing_queue_is_not_congestion() -> None:
    """The same losses with the RTT a queue above its minimum (30 %): the bottleneck's queue
    overflowing, a full path, not loss holding the window down — no host fix (the capture
    judge's test)."""
    o = obs(congestion_control="reno", retransmits=20, segs_out=2000, send_mbps=3.0,
            rtt_ms=65.1, min_rtt_ms=50.1)  # fmt: skip
    d = judge(o, SYSCTLS)
    assert d.verdict is not None and d.verdict.limiting_factor != "congestion"
    assert not d.fixes


def test_busy_unlimited_sender_is_path_capacity() -> None:
    o = obs(send_mbps=94.0, busy=0.99, delivery_rate_mbps=95.0, snd_wnd_max=20_000_000)
    assert _factor(o) == ("path-capacity", None)


def test_a_peer_window_that_halves_unread_is_the_peers_reader() -> None:
    """A sender not yet held (cwnd-limited at 75 Mbit/s, 2 MB in flight) whose peer's window
    shrank from 16 MB to 5 MB over the interval: the peer's buffer fills with data its
    reader has not taken (a reader under a CPU quota, docs/bench-application.md), so the
    reader, not the path, will set the rate. A window that holds steady or grows is no such
    sign."""
    base = dict(
        send_mbps=75.0,
        delivery_rate_mbps=76.0,
        snd_wnd_max=16_000_000,
        snd_wnd_min=5_000_000,
        inflight_max=2_000_000,
    )
    o = obs(**base, snd_wnd_first=16_000_000, snd_wnd_last=5_000_000)
    d = judge(o, SYSCTLS)
    assert d.verdict is not None
    assert (d.verdict.limiting_factor, d.verdict.host_to_fix) == ("application", "peer")
    assert any("shrank from 16 MB to 5 MB" in e for e in d.verdict.evidence)
    growing = obs(**base, snd_wnd_first=5_000_000, snd_wnd_last=16_000_000)
    assert _factor(growing) == ("path-capacity", None)
    # A window below what is in flight is the window branch's to judge, not a reader's sign.
    tight = obs(
        **{**base, "inflight_max": 6_000_000}, snd_wnd_first=16_000_000, snd_wnd_last=5_000_000
    )
    assert _factor(tight) != ("application", "peer")


def test_receiver_window_filled_is_this_hosts_rmem() -> None:
    o = obs(send_mbps=0.0, recv_mbps=20.9, rcv_rtt_ms=50.0, rcv_wnd_max=162_000, rcvbuf=262_144)
    d = judge(o, {"net.ipv4.tcp_rmem": "4096 65536 262144"})
    assert d.role == "receiving" and d.verdict is not None
    assert (d.verdict.limiting_factor, d.verdict.host_to_fix) == ("receiver-window", "local")
    assert d.fixes[0].value == "4096 65536 16777216"


def test_receiver_with_unread_data_is_the_local_application() -> None:
    o = obs(send_mbps=0.0, recv_mbps=5.0, rqueue_max=2_000_000, rcvbuf=4_000_000)
    assert _factor(o) == ("application", "local")


def test_receiver_not_window_limited_is_a_weak_path_capacity() -> None:
    o = obs(send_mbps=0.0, recv_mbps=90.0, rcv_rtt_ms=50.0, rcv_wnd_max=3_000_000)
    d = judge(o, SYSCTLS)
    assert d.verdict is not None and d.verdict.limiting_factor == "path-capacity"
    assert d.verdict.confidence < 0.5


def _rec(t: int, acked: int, busy: int, rwnd: int, snd_wnd: int, timer: int = 0) -> DiagRecord:
    info = TcpInfo(
        280,
        {
            "bytes_acked": acked,
            "busy_time": busy,
            "rwnd_limited": rwnd,
            "sndbuf_limited": 0,
            "snd_wnd": snd_wnd,
            "rtt": 50_000,
            "min_rtt": 50_000,
            "options": 4,
            "wscale": 0x77,
        },
    )
    key = ConnKey("10.0.0.1", 1, "10.0.0.2", 2)
    return DiagRecord(key, 5, 0, timer, 0, 1000, "bbr", 100, 200, info)


def test_observe_turns_counter_deltas_into_rates_and_shares() -> None:
    now = [0.0]
    calls = iter(
        [
            [_rec(0, 0, 0, 0, 100_000)],
            [_rec(1, 1_250_000, 400_000, 100_000, 0, timer=4)],
            [_rec(2, 2_500_000, 800_000, 200_000, 50_000)],
        ]
    )

    def sleep(s: float) -> None:
        now[0] += s

    (o,) = observe(1.0, 3, reader=lambda: next(calls), clock=lambda: now[0], sleep=sleep)
    assert o.seconds == pytest.approx(1.0)
    assert o.send_mbps == pytest.approx(20.0)
    assert o.busy == pytest.approx(0.8) and o.rwnd_limited == pytest.approx(0.2)
    assert (o.snd_wnd_min, o.snd_wnd_max, o.zero_window) == (0, 100_000, True)
    assert (o.snd_wnd_first, o.snd_wnd_last) == (100_000, 50_000)
    assert (o.snd_wscale, o.rcv_wscale, o.window_scaling) == (7, 7, True)


def test_connection_opened_mid_interval_is_not_judged() -> None:
    calls = iter([[], [_rec(1, 10, 0, 0, 1)]])
    assert observe(0.0, 2, reader=lambda: next(calls), sleep=lambda _s: None) == ()


def _fake_report(flt: ConnFilter) -> list[int]:
    up = obs(rwnd_limited=0.4)
    other = obs(key=ConnKey("192.168.1.5", 22, "192.168.1.9", 50000), inode=2)
    owners: Mapping[OwnerKey, Owner] = {("10.0.0.1", 43210, "10.0.0.2", 5201): IPERF3}
    rep = connections_report(
        flt, 1.0, "/nonexistent", observer=lambda _i: (up, other), owner_fn=lambda: owners
    )
    return [e.observation.inode for e in rep.entries]


@pytest.mark.parametrize(
    ("flt", "kept"),
    [
        (ConnFilter(), [1234, 2]),
        (ConnFilter(port=5201), [1234]),
        (ConnFilter(port=22), [2]),
        (ConnFilter(address="192.168.0.0/16"), [2]),
        (ConnFilter(address="10.0.0.2"), [1234]),
        (ConnFilter(process="iperf"), [1234]),
        (ConnFilter(process="4242"), [1234]),
        (ConnFilter(process="nginx"), []),
    ],
)
def test_filters(flt: ConnFilter, kept: list[int]) -> None:
    assert _fake_report(flt) == kept


def test_bad_address_filter_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="not an IP address"):
        ConnFilter(address="nope").network()


def test_text() -> None:
    out = io.StringIO()
    conns_text.render(report(), out)
    assert "receiver-window — fix the far end" in out.getvalue()


def test_json_matches_the_schema() -> None:
    out = io.StringIO()
    conns_json.render(report(), out)
    doc = valid_document(out.getvalue(), "conns")
    factors = [c["verdict"] and c["verdict"]["limiting_factor"] for c in doc["connections"]]
    assert factors == ["receiver-window", "application", None]


def test_schema_file_is_current() -> None:
    assert SCHEMA_FILE.read_text() == conns_json.schema_text(), (
        "run `python -m tcpwizard.output.conns_json docs/conns.schema.json` and commit"
    )


def test_cli_bad_interval_is_usage() -> None:
    err = io.StringIO()
    code = main(["conns", "--interval", "100s"], Context(stdout=io.StringIO(), stderr=err))
    assert code == ExitCode.USAGE and "--interval" in err.getvalue()


def test_cli_json_on_this_host_validates() -> None:
    """The real inet_diag of this namespace (whatever runs here); the document validates."""
    out = io.StringIO()
    code = main(["conns", "--json", "--interval", "0.2s"], Context(stdout=out))
    doc = valid_document(out.getvalue(), "conns")
    assert code == doc["exit_code"] and doc["total"] >= len(doc["connections"])


def test_receiver_whose_window_closes_with_data_unread_is_the_local_application() -> None:
    o = obs(
        send_mbps=0.0,
        recv_mbps=16.0,
        rqueue_max=1_000_000,
        rcvbuf=None,
        rcv_wnd_max=2_000_000,
        rcv_wnd_min=0,
    )
    d = judge(o, SYSCTLS)
    assert d.verdict is not None and d.verdict.limiting_factor == "application"
    assert d.verdict.host_to_fix == "local" and d.fixes == ()


def test_slow_scp_names_the_ssh_channel_window() -> None:
    d = judge(obs(busy=0.3), SYSCTLS, program="sshd")
    assert d.verdict is not None and d.verdict.limiting_factor == "application"
    assert any("channel window of 2 MB" in e for e in d.verdict.evidence)
    assert [f.id for f in d.fixes] == ["ssh-channel-window"]
    plain = judge(obs(busy=0.3), SYSCTLS, program="nginx")
    assert plain.fixes == ()


def test_watch_json_lines_validate() -> None:
    """Two rounds of the real inet_diag of this namespace, one JSON document per line."""
    out = io.StringIO()
    argv = ["conns", "--json", "--watch", "--count", "2", "--interval", "0.2s"]
    code = main(argv, Context(stdout=out))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    for line in lines:
        valid_document(line, "conns")
    assert code == json.loads(lines[-1])["exit_code"]


def test_a_paced_sender_filling_the_window_is_the_peers_receive_window() -> None:
    # BBR paces: it stalls on the window only while probing (16-29 % of the time), yet it
    # keeps the whole window in flight every round trip.
    window_mbps = 162_000 * 8 / 50.5e-3 / 1e6  # the peer's window per RTT
    filled = obs(
        rwnd_limited=0.16, snd_wnd_min=162_000, snd_wnd_max=162_000, send_mbps=0.95 * window_mbps
    )
    d = judge(filled, SYSCTLS)
    assert d.verdict is not None
    assert (d.verdict.limiting_factor, d.verdict.host_to_fix) == ("receiver-window", "peer")
    assert any("whole window was in flight" in e for e in d.verdict.evidence)
    # Half the window used, no stall reaching the share: the window is not what holds it.
    half = dataclasses.replace(filled, send_mbps=filled.send_mbps / 2)
    assert _factor(half) != ("receiver-window", "peer")


def test_conns_with_hops_names_a_device_that_strips_window_scaling() -> None:
    """A connection held at 64 KB with no window scaling agreed, this host offering it: the
    routers' quotes of this host's SYN toward the same peer and port show the option taken
    out past hop 2 (`conns --hops`): `middlebox` at the path, the device's fix. A trace
    without that rewrite leaves the verdict; one trace per peer and port."""
    from tcpwizard.measure.observe.synopts import SynOptions
    from tcpwizard.measure.probes.syntrace_model import SynHopFinding, SynTrace

    held = obs(window_scaling=False, snd_wnd_max=65_535, snd_wnd_min=65_535, rwnd_limited=0.9)
    sent = SynOptions(1460, 7, True, True)
    stripped = SynHopFinding(2, "10.9.0.2", 3, "10.9.0.3", ("window scaling",), ())
    calls: list[tuple[str, int]] = []

    def report(finding: SynHopFinding | None) -> list[tuple[str | None, str | None]]:
        def tracer(address: str, port: int) -> SynTrace:
            calls.append((address, port))
            return SynTrace(port, sent, (), finding, 6)

        rep = connections_report(
            ConnFilter(),
            1.0,
            "/nonexistent",
            observer=lambda _i: (held, dataclasses.replace(held, inode=2)),
            owner_fn=dict,
            tracer=tracer,
        )
        out: list[tuple[str | None, str | None]] = []
        for e in rep.entries:
            v = e.diagnosis.verdict
            out.append((v.limiting_factor, v.host_to_fix) if v else (None, None))
        return out

    assert report(stripped) == [("middlebox", "path")] * 2
    assert calls == [("10.0.0.2", 5201)]  # both connections share one trace
    assert report(None) == [("window-scaling", "both")] * 2
