"""What each end sent against what the other received (measure/observe/synopts.py,
advice/middlebox.py, the `middlebox` rule) and the lab's middlebox spec, without a lab."""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path

import pytest

from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.advice.middlebox import DOWN, UP, syn_tampering, window_scaling_stripped
from tcpwizard.exitcodes import UsageError
from tcpwizard.lab.cliparse import build_spec, parse_middlebox
from tcpwizard.lab.middlebox import ruleset
from tcpwizard.lab.spec import LabSpec, MiddleboxSpec
from tcpwizard.measure.observe.capture import Segment, syn_options
from tcpwizard.measure.observe.handshake import HandshakeFacts
from tcpwizard.measure.observe.synopts import (
    SynOptions,
    parse_options,
    parse_syn,
    save_syns,
    saved_syn,
)
from tcpwizard.measure.wire.session import ServerHello
from tests import tui_data
from tests.model_builders import host_audit

# Linux's SYN options: MSS 1460, SACK-permitted, timestamps, NOP, window scale 7.
LINUX_SYN_OPTS = bytes.fromhex("020405b40402080a000000010000000001030307")
# The same after nftables' `reset tcp option window`: the 3 bytes become NOPs.
STRIPPED_OPTS = bytes.fromhex("020405b40402080a000000010000000001010101")


def _ipv4_syn(opts: bytes) -> bytes:
    ip = bytes([0x45]) + bytes(8) + bytes([6]) + bytes(10)
    tcp = bytes(12) + bytes([((20 + len(opts)) // 4) << 4]) + bytes(7)
    return ip + tcp + opts


def test_parse_linux_and_stripped_options() -> None:
    assert parse_options(LINUX_SYN_OPTS) == SynOptions(1460, 7, True, True, 1)
    stripped = parse_options(STRIPPED_OPTS)
    assert stripped.wscale is None and stripped.nops == 4 and stripped.overwritten
    assert parse_syn(_ipv4_syn(LINUX_SYN_OPTS)) == SynOptions(1460, 7, True, True, 1)
    assert parse_syn(b"\x45") is None and parse_syn(b"") is None


def test_syn_options_wire_round_trip_and_rejects_junk() -> None:
    syn = SynOptions(1200, None, False, True, 4)
    assert SynOptions.from_wire(syn.to_wire()) == syn
    for bad in ({"mss": -1}, {"wscale": "7"}, "x", {"sack_permitted": 1, "timestamps": True}):
        assert SynOptions.from_wire(bad) is None
    hello = ServerHello(1, "s", "none", 5301, True, True, None, b"\x00" * 16, syn=syn)
    assert ServerHello.from_wire(hello.to_wire()).syn == syn
    old = hello.to_wire()
    del old["syn"]
    assert ServerHello.from_wire(old).syn is None  # a serve that predates the report


def test_saved_syn_on_loopback() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        if not save_syns(listener):
            pytest.skip("this kernel keeps no SYNs")
        listener.listen()
        with socket.create_connection(listener.getsockname()) as _client:
            conn, _ = listener.accept()
            with conn:
                syn = saved_syn(conn)
                assert syn is not None and syn.mss is not None and not syn.overwritten
                assert saved_syn(conn) is None  # handed out once


def _hs(agreed: bool, received: SynOptions | None, **kw: object) -> HandshakeFacts:
    base = HandshakeFacts(agreed, 7 if agreed else None, True, True, 1448, 50_100, port=5301)
    return dataclasses.replace(base, local_mss=1460, received_syn=received, **kw)  # type: ignore[arg-type]


def test_tampering_each_way(tmp_path: Path) -> None:
    peer = host_audit(tmp_path, "peer", {"kernel.hostname": "dtn1"})
    up = syn_tampering(_hs(False, SynOptions(1460, None, True, True, 4)), peer)
    assert [(t.option, t.direction) for t in up] == [("window scaling", UP)]
    down = syn_tampering(_hs(False, SynOptions(1460, 7, True, True, 1)), peer)
    assert [(t.option, t.direction) for t in down] == [("window scaling", DOWN)]
    clamp = syn_tampering(_hs(True, SynOptions(1200, 7, True, True, 1)), peer)
    assert [(t.option, t.sent, t.received) for t in clamp] == [("MSS", "1460", "1200")]
    assert syn_tampering(_hs(True, SynOptions(1460, 7, True, True, 1)), peer) == ()
    # No report of the SYN as received: one vantage point cannot tell, so nothing is named.
    assert syn_tampering(_hs(False, None), peer) == ()
    # This host never offered scaling: its absence on arrival is no tampering.
    off = _hs(False, SynOptions(1460, None, True, True, 1), local_scaling_offered=False)
    assert syn_tampering(off, peer) == ()


def test_verdict_blames_the_path_not_the_receiver(tmp_path: Path) -> None:
    base = tui_data.report(tmp_path)
    hs = _hs(False, SynOptions(1460, None, True, True, 4))
    assert window_scaling_stripped(hs, base.peer)
    ev = Evidence(base.host, base.peer, base.path, base.transfer, peer_handshake=hs)
    diag = diagnose(ev)
    assert diag.verdict.limiting_factor == "middlebox"
    assert diag.verdict.host_to_fix == "path"
    assert [(f.host, f.kind) for f in diag.fixes] == [("path", "other")]
    assert "stripped" in diag.verdict.explanation
    # Without the far end's report the same evidence reads as before (receiver-window).
    plain = diagnose(dataclasses.replace(ev, peer_handshake=_hs(False, None)))
    assert plain.verdict.limiting_factor != "middlebox"


def test_lab_middlebox_spec() -> None:
    mb = parse_middlebox("strip=window+sack-perm,mss=1200")
    assert mb == MiddleboxSpec(("window", "sack-perm"), 1200)
    spec = build_spec(name="x", rtt_s=0.05, rate_bps=1e8, middlebox=mb)
    assert LabSpec.from_json(spec.to_json()) == spec
    rules = ruleset(mb, "forward")
    assert "reset tcp option window" in rules and "reset tcp option sack-perm" in rules
    assert "tcp option maxseg size > 1200 tcp option maxseg size set 1200" in rules
    syn_ack = parse_middlebox("strip=window,way=syn-ack")
    assert "tcp flags & (syn | ack) == syn | ack reset tcp option window" in ruleset(syn_ack, "x")
    for bad in ("strip=wscale", "mss=abc", "", "hop=1", "strip=window,way=fin"):
        with pytest.raises(UsageError):
            parse_middlebox(bad)
    with pytest.raises(UsageError, match="no routers"):
        build_spec(name="x", rtt_s=0.05, rate_bps=1e8, middlebox=MiddleboxSpec(("window",), hop=1))
    with pytest.raises(UsageError, match="mss 1480"):
        build_spec(name="x", rtt_s=0.05, rate_bps=1e8, middlebox=MiddleboxSpec(mss=1480))


def test_capture_names_the_device_only_where_the_syn_shows_it() -> None:
    from tcpwizard.advice.capture import judge_direction
    from tcpwizard.measure.observe.capture import SynOptions as CapturedSyn
    from tests.capture_data import flow

    stripped = CapturedSyn(1460, None, True, True, 64240, nops=4)
    unscaled = dict(scaling=False, max_window=65535, window_p50=65535)
    seen = flow(
        sender_syn=stripped, receiver_syn=CapturedSyn(1460, None, True, True, 65535), **unscaled
    )
    v = judge_direction(seen, lambda a: a == "10.0.0.1")
    assert (v.verdict.limiting_factor, v.verdict.host_to_fix) == ("middlebox", "path")
    assert [(f.host, f.kind) for f in v.fixes] == [("path", "other")]
    # No NOP padding: one capture point cannot tell the far end's setting from a device,
    # and the verdict says so instead of guessing.
    plain = flow(receiver_syn=CapturedSyn(1460, None, True, True, 65535), **unscaled)
    w = judge_direction(plain, lambda a: a == "10.0.0.1").verdict
    assert w.limiting_factor == "window-scaling" and "cannot be told apart" in w.explanation


def test_conns_keeps_this_hosts_setting_out_of_the_blame() -> None:
    from tcpwizard.advice.conns import judge
    from tcpwizard.advice.observation import WSCALE_KEY
    from tests.conns_data import obs

    o = obs(rwnd_limited=0.5, snd_wnd_max=65_535, snd_wnd_min=65_535, window_scaling=False)
    on_here = judge(o, {WSCALE_KEY: "1"}).verdict
    off_here = judge(o, {WSCALE_KEY: "0"}).verdict
    assert on_here is not None and off_here is not None
    # This host offers scaling: the far end has it off or a device strips it, and from one
    # host that cannot be told apart; the verdict says so and blames only the far end.
    assert (on_here.limiting_factor, on_here.host_to_fix) == ("window-scaling", "peer")
    assert "cannot be told apart" in on_here.explanation
    assert off_here.host_to_fix == "both"


def test_scaling_taken_from_the_syn_ack_only_judges_the_upload(tmp_path: Path) -> None:
    """The far end got our window scale option (it scales), we did not get its answer: a
    failed upload is the device's doing, even when the download looks healthy."""
    base = tui_data.report(tmp_path)
    assert base.transfer is not None
    failed = tuple(
        dataclasses.replace(m, error="still delivering 30 s after the duration")
        for m in base.transfer.modes
    )
    transfer = dataclasses.replace(base.transfer, modes=failed)
    hs = _hs(False, SynOptions(1460, 7, True, True, 1))
    ev = Evidence(base.host, base.peer, base.path, transfer, peer_handshake=hs)
    diag = diagnose(ev)
    assert (diag.verdict.limiting_factor, diag.verdict.host_to_fix) == ("middlebox", "path")
    assert "SYN-ACK only" in diag.verdict.explanation
    assert any("upload failed" in e for e in diag.verdict.evidence)


def test_a_captured_syn_reads_its_options_as_the_kernel_does() -> None:
    """A capture's SYN and a probe's SYN share one parser: a timestamps option cut short by
    the end of the header is not there (tcp_parse_options stops at it), what came before
    stands, and the SYN's own window is kept."""
    whole = bytes.fromhex("020405b4") + bytes.fromhex("0402") + bytes.fromhex("010303 07")
    cut = whole + bytes.fromhex("080a0000")  # 10 bytes announced, 4 present
    seg = Segment(0.0, "10.0.0.1", 40001, "10.0.0.2", 5201, 1, 0, 0x02, 64240, 0, cut)
    got = syn_options(seg)
    assert (got.mss, got.sack, got.wscale, got.timestamps, got.window) == (
        1460,
        True,
        7,
        False,
        64240,
    )
