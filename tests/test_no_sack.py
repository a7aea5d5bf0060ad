"""SACK turned off on a host: the losses cost a round trip each, and the fix is that host's
(advice/rules/no_sack.py). Evidence shaped as the lab measured it: 100 Mbit/s x 60 ms at
0.2 % random loss with net.ipv4.tcp_sack = 0 on this host, Reno up at 8.7 Mbit/s and BBR
down at 18.5 (22 % of its segments sent again)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from benchmarks.report_evidence import evidence
from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.advice.evidence import Candidate, directions
from tcpwizard.advice.rules import no_sack, policer
from tcpwizard.measure.model import ModeResult
from tcpwizard.measure.observe.handshake import HandshakeFacts
from tests.model_builders import audit, fixes, mode, path, transfer_of

SACK_OFF = {"net.ipv4.tcp_sack": "0"}


def _lossy() -> tuple[ModeResult, ModeResult]:
    up = mode(8.7, retrans=900, nbytes=2_000_000 * 8, cc="reno")
    down = mode(18.5, direction="down", retrans=1493, nbytes=9_600_000, cc="bbr")
    return up, down


def test_sack_off_here_with_losses_both_ways_is_this_hosts_fix() -> None:
    up, down = _lossy()
    ev = Evidence(
        audit(**SACK_OFF),
        audit(),
        path(60, 100, loss_pct=0.2),
        transfer_of(up, down),
        fixes("net.ipv4.tcp_sack", "net.ipv4.tcp_congestion_control"),
    )
    d = diagnose(ev)
    v = d.verdict
    # Both ways name this host (the download's own congestion reading, `path` for its BBR
    # sender, is the weaker one there and does not make it "both").
    assert (v.limiting_factor, v.host_to_fix) == ("congestion", "local"), v
    assert "SACK" in v.explanation and "net.ipv4.tcp_sack = 0 on local" in v.evidence
    assert v.confidence >= 0.85
    assert d.fixes and d.fixes[0].key == "net.ipv4.tcp_sack"


def test_sack_off_on_a_path_that_lost_nothing_is_not_named() -> None:
    ev = Evidence(audit(**SACK_OFF), audit(), path(60, 100), transfer_of(mode(94.0)))
    v = diagnose(ev).verdict
    assert v.limiting_factor == "path-capacity"
    assert "SACK" not in v.explanation


def test_sack_off_at_the_line_rate_is_not_named() -> None:
    """Losses, but the transfer reached the path's rate: SACK did not hold it."""
    ev = Evidence(audit(), audit(**SACK_OFF), path(60, 100), transfer_of(mode(93.0, retrans=40)))
    assert "SACK" not in diagnose(ev).verdict.explanation


def test_a_far_end_without_an_audit_that_refused_sack_is_named_from_the_handshake() -> None:
    hs = HandshakeFacts(True, 7, False, True, 1448, 60_000, local_sack_offered=True)
    up, _ = _lossy()
    ev = Evidence(audit(), None, path(60, 100, loss_pct=0.2), transfer_of(up), peer_handshake=hs)
    [c] = _named(ev)
    assert (c.factor, c.host) == ("congestion", "peer")
    assert "did not agree to SACK" in c.evidence[0]
    # This host not offering SACK says nothing about the far end.
    quiet = HandshakeFacts(True, 7, False, True, 1448, 60_000, local_sack_offered=False)
    ev_quiet = Evidence(
        audit(), None, path(60, 100, loss_pct=0.2), transfer_of(up), peer_handshake=quiet
    )
    assert _named(ev_quiet) == []


def _named(ev: Evidence) -> list[Candidate]:
    return [c for d in directions(ev) if (c := no_sack.rule(ev, d)) is not None]


def test_a_lab_report_with_sack_off_names_this_host_both_ways() -> None:
    """The lab's report (Reno up, BBR down, 0.2 % random loss, 100 Mbit/s x 60 ms, SACK off
    here): the download's own congestion reading (`path`, its sender runs BBR) is weaker
    than its SACK reading; it made the verdict "both" hosts before."""
    case = Path(__file__).parent / "data" / "matrix-cases" / "lab-sack-off-reno-bbr.json.gz"
    v = diagnose(evidence(json.loads(gzip.decompress(case.read_bytes())))).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("congestion", "local"), v
    assert "net.ipv4.tcp_sack = 0 on local" in v.evidence


def test_sack_off_is_not_named_where_a_window_or_nothing_of_the_losses_held_the_rate() -> None:
    # The peer's window held the sender 80 % of the time: the window rules speak.
    held = mode(8.7, retrans=900, nbytes=16_000_000, cc="reno", rwnd=0.8)
    ev = Evidence(audit(**SACK_OFF), audit(), path(60, 100, 0.2), transfer_of(held))
    assert _named(ev) == []
    # One segment lost in 50 MB allows hundreds of Mbit/s even with timeouts (Padhye et
    # al.): 5 Mbit/s was held by something else.
    rare = mode(5.0, retrans=1, nbytes=50_000_000, cc="reno")
    ev = Evidence(audit(**SACK_OFF), audit(), path(60, 100), transfer_of(rare))
    assert _named(ev) == []


def test_a_policer_is_not_read_from_retransmissions_sack_off_inflates() -> None:
    """With SACK off at either end the retransmissions are not the path's losses one for
    one, so they cannot be tested against the idle probes (BBR with SACK off at 0.5 %
    random loss read `policer` in 2 of 3 lab tries). The stored policer report (30 of 100
    Mbit/s, BBR) names the policer; the same evidence with SACK off here does not."""
    case = (
        Path(__file__).parent
        / "data"
        / "matrix-cases"
        / ("lab-jitter-policer-30m-of-100m-40ms.json.gz")
    )
    doc = json.loads(gzip.decompress(case.read_bytes()))
    up = next(d for d in directions(evidence(doc)) if d.name == "up")
    assert policer.rule(evidence(doc), up) is not None
    doc["host"]["sysctls"]["net.ipv4.tcp_sack"] = "0"
    ev = evidence(doc)
    up = next(d for d in directions(ev) if d.name == "up")
    assert no_sack.sack_off_roles(ev, up) == ["local"]
    assert policer.rule(ev, up) is None
