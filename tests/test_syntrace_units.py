"""The SYN probes of `path` (measure/probes/syntrace.py): the segment built (checksum, options in
the kernel's layout), routers' ICMP quotes of it parsed, and where the options changed,
from fabricated quoted packets (tests/path_data.py); the middlebox verdict naming the hop."""

from __future__ import annotations

import dataclasses
import io
import os
import socket
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import ICMPv6TimeExceeded, IPv6

from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.advice.path_advice import path_advice
from tcpwizard.exitcodes import PermissionRequired
from tcpwizard.measure.observe.synopts import SynOptions, parse_options
from tcpwizard.measure.probes import syntrace
from tcpwizard.measure.probes.syntrace_model import (
    FULL,
    NONE,
    SHORT,
    checksum,
    compare,
    parse_icmp,
    parse_icmp6,
    past_last_router,
    syn_options_bytes,
    syn_segment,
)
from tcpwizard.output.path_json import syn_json
from tcpwizard.output.path_text import render
from tests import path_data, tui_data
from tests.test_middlebox_units import _hs

SRC, DST = socket.inet_aton("192.0.2.1"), socket.inet_aton("198.51.100.7")


def test_options_in_the_kernels_layout() -> None:
    # Linux's SYN: MSS, SACK-permitted + timestamps, NOP + window scale (20 bytes).
    opts = syn_options_bytes(1460, True, True, 7, tsval=1)
    assert opts == bytes.fromhex("020405b40402080a000000010000000001030307")
    assert parse_options(opts) == SynOptions(1460, 7, True, True, 1)
    # SACK off: two NOPs before the timestamps; timestamps off: two before SACK-permitted.
    assert syn_options_bytes(1460, False, True, None)[4:8] == bytes.fromhex("0101080a")
    assert syn_options_bytes(1460, True, False, 7) == bytes.fromhex("020405b40101040201030307")


def test_syn_checksum_is_right() -> None:
    seg = syn_segment(SRC, DST, 40001, 5301, 0xDEADBEEF, syn_options_bytes(1460, True, True, 7))
    # The pseudo-header and the segment sum to 0xFFFF (RFC 1071): checksum() of it is 0.
    pseudo = SRC + DST + bytes([0, 6]) + len(seg).to_bytes(2, "big")
    assert checksum(pseudo + seg) == 0
    # And scapy, computing it on its own, agrees.
    pkt = IP(bytes(IP(src="192.0.2.1", dst="198.51.100.7", proto=6) / seg))
    theirs = pkt[TCP].chksum
    del pkt[TCP].chksum
    assert IP(bytes(pkt))[TCP].chksum == theirs
    assert pkt[TCP].flags == "S" and pkt[TCP].seq == 0xDEADBEEF and pkt[TCP].dataofs == 10


def test_ipv6_syn_checksum_is_right() -> None:
    src, dst = (
        socket.inet_pton(socket.AF_INET6, "2001:db8::1"),
        socket.inet_pton(socket.AF_INET6, "2001:db8::7"),
    )
    seg = syn_segment(src, dst, 40001, 5301, 0xDEADBEEF, syn_options_bytes(1440, True, True, 7))
    # scapy recomputes it over RFC 8200's pseudo-header and must find the same.
    pkt = IPv6(bytes(IPv6(src="2001:db8::1", dst="2001:db8::7", nh=6) / seg))
    theirs = pkt[TCP].chksum
    del pkt[TCP].chksum
    assert IPv6(bytes(pkt))[TCP].chksum == theirs
    assert pkt[TCP].flags == "S" and pkt[TCP].options[0] == ("MSS", 1440)


def test_icmpv6_quotes_are_read() -> None:
    """A router's ICMPv6 time exceeded as a raw ICMPv6 socket delivers it (no IPv6 header):
    the quoted SYN with its options; an MSS clamped on the way reads as seen."""
    opts = syn_options_bytes(1200, True, True, 7, tsval=1)
    syn = syn_segment(bytes(16), bytes(16), 40001, 5301, 0x1234_0001, opts)
    quoted = bytes(IPv6(src="2001:db8::1", dst="2001:db8::7", nh=6, hlim=1) / TCP(syn))
    te = bytes(ICMPv6TimeExceeded() / quoted)
    q = parse_icmp6(te)
    assert q is not None and (q.sport, q.dport, q.seq) == (40001, 5301, 0x1234_0001)
    assert q.dst == socket.inet_pton(socket.AF_INET6, "2001:db8::7")
    assert q.options is not None and q.options.mss == 1200 and q.options.wscale == 7
    # An echo reply, or a quote cut short before the TCP ports, is not a quote of a probe.
    assert parse_icmp6(bytes([129, 0]) + bytes(60)) is None
    assert parse_icmp6(te[:50]) is None


def test_odd_length_checksum() -> None:
    assert checksum(b"\x01") == checksum(b"\x01\x00") == 0xFEFF


def test_quotes_full_and_short() -> None:
    full = parse_icmp(path_data.time_exceeded("10.0.0.1", path_data.probe()))
    assert full is not None and full.options == path_data.SENT
    assert (full.sport, full.dport, full.seq) == (path_data.SPORT, 5301, path_data.SEQ)
    short = parse_icmp(path_data.time_exceeded("10.0.0.1", path_data.probe(), 8))
    assert short is not None and short.options is None and short.seq == path_data.SEQ
    # Not a quote of a TCP probe: an echo reply, a packet cut short.
    assert parse_icmp(path_data._ipv4("10.0.0.1", "10.0.0.2", 1, bytes(8))) is None
    assert parse_icmp(b"\x45" + bytes(10)) is None


def test_compare_names_removed_and_changed() -> None:
    sent = path_data.SENT
    assert compare(sent, sent) == ((), ())
    seen = SynOptions(1200, None, False, True, 5)
    assert compare(sent, seen) == (("window scaling", "SACK"), ("MSS clamped 1460 -> 1200",))
    assert compare(sent, SynOptions(1460, 2, True, True)) == ((), ("window scale 7 -> 2",))


def test_first_hop_that_quotes_the_rewrite_names_the_device() -> None:
    hops = path_data.rewritten_hops(wscale=None)
    assert [h.quote for h in hops] == [FULL] * 4 + [NONE]
    f = path_data.syn_trace(wscale=None).finding
    assert f is not None
    assert (f.after_hop, f.before_hop, f.removed) == (2, 3, ("window scaling",))
    assert "between hop 2 (10.200.3.10) and hop 3 (10.200.3.14)" in f.text
    assert "hop 2 itself" in f.text


def test_hops_that_tell_nothing_widen_the_stretch() -> None:
    short = path_data.syn_trace(mss=1200, short_at=2)
    assert short.hops[1].quote == SHORT
    f = short.finding
    assert f is not None and (f.after_hop, f.before_hop) == (1, 3)
    assert f.changed == ("MSS clamped 1460 -> 1200",) and "one of hops 1-2" in f.text
    silent = path_data.syn_trace(mss=1200, silent_at=3).finding
    assert silent is not None and (silent.after_hop, silent.before_hop) == (2, 4)


def test_nothing_rewritten_before_the_far_end() -> None:
    t = path_data.syn_trace()
    assert t.finding is None
    # The far end reported a rewrite no router quoted: past the last router, hop 4.
    where = past_last_router(t.hops)
    assert where is not None and "hop 4 (10.200.3.18)" in where
    # Routers that quote 8 bytes only: nothing can be said.
    short = dataclasses.replace(t, hops=tuple(dataclasses.replace(h, quote=SHORT, seen=None)
                                              for h in t.hops))  # fmt: skip
    assert past_last_router(short.hops) is None


def test_path_shows_the_options_per_hop_and_the_finding() -> None:
    p = path_data.rewritten()
    adv = path_advice(p)
    f = next(x for x in adv.findings if x.id == "path-middlebox")
    assert f.severity == "warn" and "between hop 2" in f.observed
    out = io.StringIO()
    render(p, adv, out)
    text = out.getvalue()
    assert "SYN options per hop (port 5301), sent: MSS 1460, window scale 7" in text
    assert "window scaling removed" in text and "as sent" in text
    doc = syn_json(p.syn)
    assert doc is not None and doc["finding"]["after_hop"] == 2
    assert doc["hops"][2]["seen"]["nops"] == 4


def test_middlebox_verdict_names_the_hop(tmp_path: Path) -> None:
    base = tui_data.report(tmp_path)
    hs = _hs(False, SynOptions(1460, None, True, True, 4))
    ev = Evidence(base.host, base.peer, base.path, base.transfer, peer_handshake=hs)
    plain = diagnose(ev).verdict
    assert plain.limiting_factor == "middlebox" and "hop" not in plain.explanation
    ev = dataclasses.replace(ev, syn_hops=path_data.syn_trace(wscale=None))
    v = diagnose(ev).verdict
    assert v.limiting_factor == "middlebox" and v.host_to_fix == "path"
    assert "between hop 2 (10.200.3.10) and hop 3 (10.200.3.14)" in v.explanation
    assert any("hop 2 itself" in e for e in v.evidence)
    # Only the far end saw it: the last router that quoted the SYN intact is named.
    ev = dataclasses.replace(ev, syn_hops=path_data.syn_trace())
    v = diagnose(ev).verdict
    assert "hop 4 (10.200.3.18) quoted the SYN as sent" in v.explanation


def test_own_options_follow_the_sysctls() -> None:
    o = syntrace.own_syn_options(9000)
    assert o.mss == 8960
    with open("/proc/sys/net/ipv4/tcp_sack") as f:
        assert o.sack_permitted == (f.read().strip() != "0")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may open raw sockets")
def test_needs_root() -> None:
    with pytest.raises(PermissionRequired, match="need root"):
        syntrace.syn_trace("127.0.0.1", 5301, 65536, 1)


@pytest.mark.skipif(os.geteuid() != 0, reason="raw sockets need root")
def test_loopback_reaches_the_far_end_at_ttl_1() -> None:
    """A real raw socket: the SYN to a closed port on loopback draws the kernel's RST, which
    marks TTL 1 as the far end (no router on the way, nothing to quote)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: the kernel answers RST
        # Three probes: under a parallel test run loopback carries every other test's TCP.
        t = syntrace.syn_trace("127.0.0.1", port, 65536, 3, probes=3, max_time_s=2)
    assert t.hops[-1].destination and t.hops[-1].ttl == 1
    assert t.finding is None


@pytest.mark.skipif(os.geteuid() != 0, reason="raw sockets need root")
def test_ipv6_loopback_reaches_the_far_end_at_hop_limit_1() -> None:
    """The same over IPv6: raw IPv6 sockets deliver the far end's RST without its IP header,
    and the MSS leaves the IPv6 header out of the route's MTU."""
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        port = s.getsockname()[1]
        t = syntrace.syn_trace("::1", port, 65536, 3, probes=3, max_time_s=2)
    assert t.hops[-1].destination and t.hops[-1].ttl == 1
    assert t.sent.mss == 65536 - 60
