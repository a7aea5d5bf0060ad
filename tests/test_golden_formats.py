"""The check reports behind the check's golden files (tests/test_golden_documents.py renders
each in every format): a measured check (serve far end), a prediction (only a plain port
answered, window scaling refused in the handshake), a policer and a middlebox; and what
their formats must say."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.advice.handshake_findings import handshake_findings
from tcpwizard.advice.model import Verdict, WizardGap
from tcpwizard.exitcodes import ExitCode
from tcpwizard.measure.model import IdleLoss
from tcpwizard.measure.observe.handshake import HandshakeFacts
from tcpwizard.measure.observe.synopts import SynOptions
from tcpwizard.output import registry
from tcpwizard.output.document import RenderOptions
from tcpwizard.report import FarEndInfo, Report
from tests import tui_data


def measured(tmp: Path) -> Report:
    base = tui_data.report(tmp)
    hs = HandshakeFacts(True, 7, True, True, 1448, 50_100, port=5301)
    return dataclasses.replace(
        base,
        measured=True,
        far_end=FarEndInfo("serve", 5301, "tcpwizard serve at port 5301"),
        peer_handshake=hs,
        peer_handshake_findings=handshake_findings(hs, 0.05),
    )


def predicted(tmp: Path) -> Report:
    base = tui_data.report(tmp)
    hs = HandshakeFacts(False, None, True, True, 1448, 50_100, port=22)
    found = handshake_findings(hs, 0.05)
    verdict = Verdict(
        "window-scaling",
        0.39,
        "peer",
        "up: TCP window scaling (RFC 7323) is off on the peer host, so the window cannot "
        "exceed 64 KB whatever the buffers are; turn it on at both ends.",
        (
            "the peer host did not agree to window scaling in the TCP handshake",
            "64 KB / 50.1 ms = 10.5 Mbit/s at most",
            "missing: no peer audit (the far end does not run `tcpwizard serve`)",
            "missing: no test transfer",
        ),
        WizardGap(10.5, 100.1, False),
    )
    return dataclasses.replace(
        base,
        verdict=verdict,
        fixes=tuple(f for x in found for f in x.fixes),
        exit_code=ExitCode.UNKNOWN,
        peer=None,
        transfer=None,
        path=dataclasses.replace(tui_data.path_estimate(), peer=False, port=22),
        notes=("not measured: no transfer: the far end runs neither tcpwizard serve nor iperf3",),
        measured=False,
        far_end=FarEndInfo(
            "tcp-port",
            22,
            "TCP port 22 (open); no serve, no iperf3",
            ("no test transfer: the far end runs neither tcpwizard serve nor iperf3",),
        ),
        peer_handshake=hs,
        peer_handshake_findings=found,
    )


def policed(tmp: Path) -> Report:
    """A policer on the path: the verdict, its pacing fixes (snippets in the text) and the
    transfer's RTT under load and rate plateau, from the rule on a synthetic policed
    transfer."""
    from tests.test_policer_bloat_rules import policed as policed_evidence

    ev = policed_evidence()
    # The idle probes a check sends after the transfers when their losses need telling apart
    # from random loss (advice/idle_follow_up.py): in the JSON's path as measured.
    assert ev.path is not None
    more = IdleLoss(48, 0, "udp-echo")
    ev = dataclasses.replace(ev, path=dataclasses.replace(ev.path, idle_loss=more))
    return _judged(measured(tmp), ev)


def _judged(base: Report, ev: Evidence) -> Report:
    """`base` with the verdict and fixes the real rules give `ev`, and its path and
    transfers (a warning)."""
    d = diagnose(ev)
    return dataclasses.replace(
        base,
        verdict=d.verdict,
        fixes=d.fixes,
        path=ev.path,
        transfer=ev.transfer,
        exit_code=ExitCode.WARNING,
    )


def middlebox(tmp: Path) -> Report:
    """Window scaling stripped from our SYN on the way: serve's report of the SYN it got
    against what we sent, judged by the real rules (the transfer sits at 64 KB / RTT)."""
    base = tui_data.report(tmp)
    syn = SynOptions(1460, None, True, True, nops=4)
    hs = HandshakeFacts(
        False, None, True, True, 1448, 50_100, port=5301, local_mss=1460, received_syn=syn
    )
    ev = Evidence(base.host, base.peer, base.path, base.transfer, peer_handshake=hs)
    diag = diagnose(ev)
    return dataclasses.replace(
        base,
        verdict=diag.verdict,
        fixes=diag.fixes,
        measured=True,
        far_end=FarEndInfo("serve", 5301, "tcpwizard serve at port 5301"),
        peer_handshake=hs,
        peer_handshake_findings=handshake_findings(hs, 0.05),
    )


def shared_way_back(tmp: Path) -> Report:
    """Others' UDP on the way back: the available bandwidth measured both ways (the upload's
    free, the download's streams sent back loaded), from a stored lab report's path and
    transfers judged by the real rules."""
    from tests.test_matrix_cases import stored_evidence

    ev = stored_evidence("lab-udp-60m-on-the-way-back-streams-back-100m-50ms")
    back = ev.path.available_down if ev.path else None
    assert ev.path is not None and back is not None
    cap = back.capacity_bps
    up = dataclasses.replace(back, estimate_bps=cap, low_bps=90e6, high_bps=cap, loaded=0,
                             streams=10, direction="up")  # fmt: skip
    ev = dataclasses.replace(ev, path=dataclasses.replace(ev.path, available=up))
    return _judged(measured(tmp), ev)


CASES = {
    "measured": measured,
    "predicted": predicted,
    "policed": policed,
    "middlebox": middlebox,
    "shared-way-back": shared_way_back,
}


def _render(report: Report, fmt: str) -> tuple[int, str]:
    out = io.StringIO()
    code = registry.emit(report, fmt, out, RenderOptions(color=False))
    return int(code), out.getvalue()


def test_prediction_leads_with_what_was_not_measured(tmp_path: Path) -> None:
    _, text = _render(predicted(tmp_path), "text")
    assert text.splitlines()[1].startswith("PREDICTED — not measured: no transfer")
    _, line = _render(predicted(tmp_path), "nagios")
    assert line.startswith("TCPWIZARD UNKNOWN - dtn1.example: no transfer")
    doc = json.loads(_render(predicted(tmp_path), "json")[1])
    assert doc["measured"] is False and doc["peer_handshake"]["window_scaling"] is False
    assert doc["fixes"][0]["host"] == "peer"


def test_middlebox_names_the_path_not_a_host(tmp_path: Path) -> None:
    report = middlebox(tmp_path)
    assert report.verdict.limiting_factor == "middlebox"
    assert report.verdict.host_to_fix == "path"
    assert [f.host for f in report.fixes] == ["path"]
    assert all(f.kind == "other" for f in report.fixes)
    doc = json.loads(_render(report, "json")[1])
    assert doc["peer_handshake"]["tampering"][0]["option"] == "window scaling"
    assert doc["peer_handshake"]["received_syn"]["wscale"] is None


def test_both_ways_available_bandwidth_is_shown_by_way(tmp_path: Path) -> None:
    report = shared_way_back(tmp_path)
    assert report.verdict.limiting_factor == "cross-traffic"
    _, text = _render(report, "text")
    assert "  available 99.8 Mbit/s" in text and "  available back 39.1 Mbit/s" in text, text
    doc = json.loads(_render(report, "json")[1])
    assert doc["path"]["available"]["loaded_streams"] == 0
    assert doc["path"]["available_down"]["loaded_streams"] == 6
