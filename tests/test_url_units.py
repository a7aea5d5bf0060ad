"""`check URL` without a network: URL and response-head parsing, the request we send, and
the verdict from a receiving socket's view (constructed results)."""

from __future__ import annotations

import pytest

from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.checks.model import HostAudit
from tcpwizard.measure.farends.url import UrlError, is_url, parse_head, parse_url, request_bytes
from tcpwizard.measure.model import (
    CapacityEstimate,
    ModeResult,
    PathEstimate,
    ReceiverView,
    RttStats,
    TransferResult,
    TransferSample,
)


def test_parse_url() -> None:
    u = parse_url("https://[2001:db8::1]:8443/data/big.iso?x=1")
    assert (u.scheme, u.host, u.port, u.target, u.tls) == (
        "https",
        "2001:db8::1",
        8443,
        "/data/big.iso?x=1",
        True,
    )
    assert parse_url("http://dtn.example").port == 80 and parse_url("http://h").target == "/"
    assert is_url("HTTP://x") and not is_url("dtn.example")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("ftp://h/x", "only http:// and https://"),
        ("http:///x", "names no host"),
        ("http://h:99999/", "port"),
    ],
)
def test_bad_urls(text: str, why: str) -> None:
    with pytest.raises(UrlError, match=why):
        parse_url(text)


def test_request_asks_identity_close_and_range() -> None:
    req = request_bytes(parse_url("http://[2001:db8::1]:8080/f"), 1_000_000).decode()
    assert req.startswith("GET /f HTTP/1.1\r\nHost: [2001:db8::1]:8080\r\n")
    assert "Accept-Encoding: identity\r\n" in req and "Connection: close\r\n" in req
    assert req.endswith("Range: bytes=0-999999\r\n\r\n")
    assert "Range" not in request_bytes(parse_url("https://h/f"), None).decode()


def test_parse_head() -> None:
    h = parse_head(b"HTTP/1.1 302 Moved Temporarily\r\nLocation: /big.bin\r\n\r\nabc")
    assert (h.status, h.reason, h.location, h.body_start) == (
        302,
        "Moved Temporarily",
        "/big.bin",
        3,
    )
    with pytest.raises(UrlError, match="did not answer HTTP"):
        parse_head(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")


RTT = RttStats(50.0, 50.2, 50.5, 50.2, 0.1, 51.0, 0.0, 0.05, 10, "tcp-connect")
WEAK_PROBE = PathEstimate(
    RTT, CapacityEstimate(270.0, "peerless-tcp-syn-pairs", 0.35), 0, 1, "b", 80
)


def _download(mbps: float, view: ReceiverView, mode: str = "autotune") -> ModeResult:
    samples = tuple(TransferSample(0.1 * i, mbps, 1 << 20, 0) for i in range(1, 30))
    return ModeResult(
        mode,  # type: ignore[arg-type]
        "down",
        1,
        int(mbps * 1e6 / 8 * 3),
        3.0,
        mbps,
        1 << 20,
        0,
        samples,
        receiver_view=view,
    )


def _verdict(*modes: ModeResult) -> tuple[str, str | None]:
    local = HostAudit("near", "6.18", (), "bbr", (("net.ipv4.tcp_rmem", "4096 131072 6291456"),))
    d = diagnose(Evidence(local, None, WEAK_PROBE, TransferResult(modes, "down")))
    return d.verdict.limiting_factor, d.verdict.host_to_fix


def test_sender_keeping_little_in_flight_without_loss_is_its_send_buffer() -> None:
    # 18 Mbit/s while our window (0.8 MB / 50 ms = 129 Mbit/s) allowed far more, no loss,
    # no queue: the web server's send buffer.
    view = ReceiverView(800_000, 50_500, 0, 1448)
    assert _verdict(_download(18.0, view), _download(17.6, view, "static")) == (
        "sender-buffer",
        "peer",
    )


def test_losses_seen_by_the_receiver_below_the_path_are_congestion() -> None:
    view = ReceiverView(3_000_000, 51_000, 800, 1448)
    assert _verdict(_download(8.0, view)) == ("congestion", "peer")


def test_queue_built_at_the_rate_of_the_transfer_is_the_path() -> None:
    # The receiver's RTT rose 60 % above the minimum: the sender filled the bottleneck.
    view = ReceiverView(20_000_000, 80_000, 0, 1448)
    assert _verdict(_download(95.0, view), _download(96.0, view, "static")) == (
        "path-capacity",
        None,
    )


def test_a_queue_drained_after_each_loss_still_shows_in_the_high_percentile() -> None:
    # CUBIC drains the queue after every loss: the median RTT sits at the minimum, the
    # 90th percentile 30 % above it. With losses and the rate far under our window, the
    # median alone would call this congestion.
    view = ReceiverView(20_000_000, 50_400, 600, 1448, rcv_rtt_high_us=65_000)
    assert _verdict(_download(96.0, view)) == ("path-capacity", None)
    flat = ReceiverView(20_000_000, 50_400, 600, 1448, rcv_rtt_high_us=51_000)
    assert _verdict(_download(96.0, flat)) == ("congestion", "peer")


def test_a_download_that_filled_the_queue_is_the_path_whatever_the_probe_guessed() -> None:
    # A peerless guess of 470 Mbit/s on a 100 Mbit/s path; the receiver's RTT rose 60 %.
    probe = PathEstimate(
        RTT, CapacityEstimate(470.0, "peerless-tcp-syn-pairs", 0.35), 0, 1, "b", 80
    )
    view = ReceiverView(20_000_000, 80_000, 900, 1448)
    local = HostAudit("near", "6.18", (), "bbr", (("net.ipv4.tcp_rmem", "4096 131072 6291456"),))
    ev = Evidence(local, None, probe, TransferResult((_download(95.0, view),), "down"))
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("path-capacity", None)
