"""`tcpwizard path` without a network: the hop analysis (loss start, ICMP rate limiting, RTT
jump), the advice, the ICMP parser, and what the text and JSON say (their golden files:
tests/test_golden_documents.py)."""

from __future__ import annotations

import io
import json
import socket
import struct
from pathlib import Path

import jsonschema
import pytest

from tcpwizard.advice.path_advice import path_advice
from tcpwizard.advice.window_law import mathis_mbps
from tcpwizard.exitcodes import ExitCode, UsageError
from tcpwizard.measure.probes.hop_model import HopCounts, analyse, binom_cdf, loss_start
from tcpwizard.measure.probes.hops import IcmpProber, PathOptions
from tcpwizard.measure.probes.rtt import icmp_checksum
from tcpwizard.output import path_json, path_text
from tests import path_data

ROOT = Path(__file__).parent.parent
SCHEMA = json.loads((ROOT / "docs/path.schema.json").read_text())


def _hc(ttl: int, sent: int, got: int, rtt: float = 10.0, span: float = 3.0) -> HopCounts:
    return HopCounts(ttl, sent, (rtt,) * got, (f"10.0.0.{ttl}",) * got, False, span_s=span)


def test_binomial_cdf() -> None:
    assert binom_cdf(0, 10, 0.5) == pytest.approx(1 / 1024)
    assert binom_cdf(10, 10, 0.3) == pytest.approx(1.0)
    assert binom_cdf(0, 300, 0.0) == 1.0


def test_loss_begins_where_it_carries_on() -> None:
    # 1 % from the third hop on; the first two lose nothing.
    i, rate = loss_start([(300, 0), (300, 0), (300, 4), (300, 2), (300, 3)])
    assert i == 2
    assert rate == pytest.approx(9 / 900)


def test_loss_on_one_hop_only_is_not_path_loss() -> None:
    # Hop 2 answers 10 % of probes, the others all: its router's ICMP rate limit.
    hops, _j, _ms, start, end, limited = analyse(
        [_hc(1, 300, 300), _hc(2, 300, 30), _hc(3, 300, 300), _hc(4, 300, 300)]
    )
    assert start is None and end == 0.0
    assert limited == (2,)
    assert hops[1].rate_limited and hops[1].real_loss_pct == 0.0
    assert not any(h.rate_limited for h in hops if h.ttl != 2)


def test_rate_limit_on_top_of_real_loss() -> None:
    hops, _j, _ms, start, end, limited = analyse(
        [_hc(1, 400, 400), _hc(2, 400, 396), _hc(3, 400, 200), _hc(4, 400, 395)]
    )
    assert start == 2
    assert limited == (3,)
    assert hops[2].real_loss_pct == pytest.approx(end)
    assert 0.5 < end < 2.0


def test_target_answering_at_a_token_buckets_pace_is_rate_limited() -> None:
    # UDP to a closed port: the target's port unreachables are limited (burst 6, 1/s).
    counts = [_hc(1, 300, 300), _hc(2, 300, 300), _hc(3, 300, 9, span=3.0)]
    _hops, _j, _ms, start, _e, limited = analyse(counts)
    assert limited == (3,) and start is None


def test_rtt_jump() -> None:
    counts = [_hc(1, 10, 10, 1.0), _hc(2, 10, 10, 41.0), _hc(3, 10, 10, 41.5)]
    _h, jump, ms, *_ = analyse(counts)
    assert jump == 2 and ms == pytest.approx(40.0)
    flat = [_hc(1, 10, 10, 20.0), _hc(2, 10, 10, 20.3), _hc(3, 10, 10, 20.6)]
    assert analyse(flat)[1] == 1  # all the delay is on the first link


def test_mathis() -> None:
    # 1448 B, 50 ms, 1 %: 1448*8/0.05*1.22/0.1 = 2.83 Mbit/s
    bound = mathis_mbps(1448, 50.0, 0.01)
    assert bound is not None and bound == pytest.approx(2.837, rel=0.01)
    assert mathis_mbps(1448, 50.0, 0.0) is None


def test_advice_blackhole_is_critical_with_its_fixes() -> None:
    adv = path_advice(path_data.path(blackhole=True))
    assert adv.exit_code == ExitCode.CRITICAL
    hole = next(f for f in adv.findings if f.id == "path-pmtu-blackhole")
    commands = [x.command for x in hole.fixes]
    assert "sysctl -w net.ipv4.tcp_mtu_probing=1" in commands
    assert any("mtu lock 1500 advmss 1460" in c and "via 10.200.3.6 dev wan0" in c
               for c in commands)  # fmt: skip
    assert "hop 2 (10.200.3.10 core-2.example.net)" in hole.message


def test_advice_jumbo_behind_smaller_hop_and_loss() -> None:
    adv = path_advice(path_data.path())
    ids = [f.id for f in adv.findings]
    assert ids == ["path-mtu-smaller", "path-loss", "path-icmp-ratelimit", "path-rtt-jump"]
    mtu = adv.findings[0]
    assert mtu.severity == "warn" and "9000" in mtu.message and "1500" in mtu.message
    loss = adv.findings[1]
    assert loss.severity == "crit" and "Mathis bound" in loss.message
    assert adv.exit_code == ExitCode.CRITICAL


def test_unreached_is_unknown() -> None:
    assert path_advice(path_data.unreached()).exit_code == ExitCode.UNKNOWN


def test_options_are_bounded() -> None:
    with pytest.raises(UsageError):
        PathOptions(count=0).validate()
    with pytest.raises(UsageError):
        PathOptions(count=5000).validate()
    with pytest.raises(UsageError):
        PathOptions(method="tcp").validate()
    with pytest.raises(UsageError):
        PathOptions(max_time_s=10_000).validate()


def _ipv4(src: str, proto: int, payload: bytes, ttl: int = 64) -> bytes:
    return struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0, ttl, proto, 0,
        socket.inet_aton(src), socket.inet_aton("10.0.0.1"),
    ) + payload  # fmt: skip


def _prober(family: int) -> IcmpProber:
    p = IcmpProber.__new__(IcmpProber)  # no raw socket: only the parser is tested
    p.family, p.ident = family, 0x4242
    return p


def test_icmp_parser_v4() -> None:
    p = _prober(socket.AF_INET)
    echo = struct.pack("!BBHHH", 8, 0, 0, 0x4242, 7)
    quoted = _ipv4("10.0.0.1", 1, echo, ttl=1)
    exceeded = struct.pack("!BBHI", 11, 0, 0, 0) + quoted
    assert p._parse(_ipv4("10.200.0.6", 1, exceeded)) == (7, "ttl", None)
    frag = struct.pack("!BBHHH", 3, 4, 0, 0, 1500) + quoted
    assert p._parse(_ipv4("10.200.0.6", 1, frag)) == (7, "mtu", 1500)
    reply = struct.pack("!BBHHH", 0, 0, 0, 0x4242, 9)
    assert p._parse(_ipv4("10.0.0.9", 1, reply)) == (9, "dest", None)
    other = struct.pack("!BBHHH", 0, 0, 0, 0x1111, 9)
    assert p._parse(_ipv4("10.0.0.9", 1, other)) is None
    assert icmp_checksum(b"\x00\x00") == 0xFFFF


def test_icmp_parser_v6() -> None:
    p = _prober(socket.AF_INET6)
    echo = struct.pack("!BBHHH", 128, 0, 0, 0x4242, 3)
    quoted = bytes(40) + echo
    ptb = struct.pack("!BBHI", 2, 0, 0, 1280) + quoted
    assert p._parse(ptb) == (3, "mtu", 1280)
    exceeded = struct.pack("!BBHI", 3, 0, 0, 0) + quoted
    assert p._parse(exceeded) == (3, "ttl", None)
    assert p._parse(struct.pack("!BBHHH", 129, 0, 0, 0x4242, 4)) == (4, "dest", None)


@pytest.mark.parametrize("blackhole", [False, True], ids=["loss-jumbo", "blackhole"])
def test_text_and_json(blackhole: bool) -> None:
    p = path_data.path(blackhole=blackhole)
    adv = path_advice(p)
    out = io.StringIO()
    path_text.render(p, adv, out)
    assert ("PMTU black hole" in out.getvalue()) == blackhole
    doc = path_json.path_json(p, adv)
    jsonschema.validate(doc, SCHEMA)
    assert doc["exit_code"] == 2


def test_schema_file_is_current() -> None:
    assert (ROOT / "docs/path.schema.json").read_text() == path_json.schema_text(), (
        "run `python -m tcpwizard.output.path_json docs/path.schema.json` and commit"
    )


def test_check_report_with_hops(tmp_path: Path) -> None:
    """`check --hops`: the hops section in text and JSON (the report schema allows it)."""
    import dataclasses

    from tcpwizard.output import registry
    from tcpwizard.output.document import RenderOptions
    from tests import tui_data

    p = path_data.path(blackhole=True)
    report = dataclasses.replace(tui_data.report(tmp_path), hops=p, hops_advice=path_advice(p))
    for fmt in ("text", "json"):
        out = io.StringIO()
        registry.get(fmt).render(report, out, RenderOptions(color=False))
        text = out.getvalue()
        if fmt == "json":
            doc = json.loads(out.getvalue())
            report_schema = json.loads((ROOT / "docs/report.schema.json").read_text())
            jsonschema.validate(doc, report_schema)
            assert doc["hops"]["mtu"]["blackhole"] is True
        else:
            assert "PMTU black hole" in text and "hop  address" in text
