"""SACK not agreed, in the views that judge one connection (`conns`, `check --pcap`): the
same reading as check's (advice/rules/no_sack.py), through the shared ladder
(advice/ladder.py): losses that hold the sender are congestion on the host whose SYN did
not offer SACK, with tcp_sack=1 as its fix."""

from __future__ import annotations

import dataclasses

from tcpwizard.advice.capture import judge_direction
from tcpwizard.advice.conns import judge
from tcpwizard.measure.observe.capture import FlowDirection, SynOptions
from tests.capture_data import lossy_flow
from tests.conns_data import SYSCTLS, obs

# Reno at its Mathis bound: 20 of 2,000 segments lost at 50 ms holds it near 3 Mbit/s.
LOSSY = dict(congestion_control="reno", retransmits=20, segs_out=2000, send_mbps=3.0)


def test_a_live_connection_without_sack_names_the_host_that_turned_it_off() -> None:
    here_off = judge(obs(sack=False, **LOSSY), {**SYSCTLS, "net.ipv4.tcp_sack": "0"})
    v = here_off.verdict
    assert v is not None and (v.limiting_factor, v.host_to_fix) == ("congestion", "local")
    assert "SACK" in v.explanation
    assert here_off.fixes[0].key == "net.ipv4.tcp_sack" and here_off.fixes[0].value == "1"
    # This host offers it: the far end (or a device) kept it out.
    peer_off = judge(obs(sack=False, **LOSSY), {**SYSCTLS, "net.ipv4.tcp_sack": "1"})
    assert peer_off.verdict is not None and peer_off.verdict.host_to_fix == "peer"
    # This host's setting unread: either end may have refused it.
    unread = judge(obs(sack=False, **LOSSY), SYSCTLS)
    assert unread.verdict is not None and unread.verdict.host_to_fix == "both"
    # SACK agreed: the losses' own verdict, BBR its fix.
    agreed = judge(obs(**LOSSY), SYSCTLS)
    assert agreed.verdict is not None and agreed.verdict.host_to_fix == "local"
    assert "SACK" not in agreed.verdict.explanation and agreed.fixes[0].value == "bbr"


def test_no_losses_no_sack_verdict() -> None:
    v = judge(obs(sack=False), {**SYSCTLS, "net.ipv4.tcp_sack": "0"}).verdict
    assert v is not None and "SACK" not in v.explanation


def test_a_captured_flow_without_sack_names_the_host_whose_syn_lacked_it() -> None:
    lossy = lossy_flow()
    no_sack_rcv = dataclasses.replace(lossy, receiver_syn=SynOptions(1460, 7, False, True, 65160))
    d = judge_direction(no_sack_rcv, lambda a: a == "10.0.0.1")
    v = d.verdict
    assert (v.limiting_factor, v.host_to_fix) == ("congestion", "peer")
    assert any("no SACK-permitted in the SYN of 10.0.0.2" in e for e in v.evidence)
    assert [f.key for f in d.fixes] == ["net.ipv4.tcp_sack"]
    with_sack = judge_direction(lossy, lambda a: a == "10.0.0.1").verdict
    assert (with_sack.limiting_factor, with_sack.host_to_fix) == ("congestion", "local")
    assert "SACK" not in with_sack.explanation


def test_both_syns_without_sack_blame_the_host_that_opened_the_connection() -> None:
    """An answer may carry SACK only where the SYN offered it (RFC 2018): a SYN-ACK without
    it after a SYN without it says nothing of the answering host."""
    lossy = lossy_flow()
    syn, answer = SynOptions(1460, 7, False, True, 64240), SynOptions(1460, 7, False, True, 65160)
    opened_here = dataclasses.replace(
        lossy, sender_syn=syn, receiver_syn=dataclasses.replace(answer, answer=True)
    )
    assert _named(opened_here) == ("congestion", "local")
    opened_there = dataclasses.replace(
        lossy, sender_syn=dataclasses.replace(syn, answer=True), receiver_syn=answer
    )
    assert _named(opened_there) == ("congestion", "peer")
    unknown = dataclasses.replace(lossy, sender_syn=syn, receiver_syn=answer)
    assert _named(unknown) == ("congestion", "both")


def _named(f: FlowDirection) -> tuple[str, str | None]:
    v = judge_direction(f, lambda a: a == "10.0.0.1").verdict
    return v.limiting_factor, v.host_to_fix
