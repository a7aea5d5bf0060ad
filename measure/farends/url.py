"""A web server as the far end (`check URL`): real downloads of the URL over HTTP or HTTPS.

The transfer is the server's own sending of the file, judged from our receiving socket:
goodput from the bytes that arrive, and TCP_INFO sampled on that socket (the window we
offer, what arrives per RTT, segments out of order). With TLS, the handshake and the
response head go through an `ssl.SSLObject` over memory buffers; after that the body's
bytes are counted as they arrive on the TCP socket and never decrypted, so the engine's
receiver (measure/engine/datapath.py) reads the socket as it does for any far end. Nothing is
written to disk; a transfer ends by closing the connection (or with `Range:` when a byte
count was asked for). Redirects are followed before the first transfer.

Why one module of this size: one far end: the HTTP/HTTPS request, redirects and the sampled
download that the contract needs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass

from tcpwizard import __version__
from tcpwizard.exitcodes import Unavailable
from tcpwizard.measure.engine import buffers, datapath, rates
from tcpwizard.measure.engine.transfer import live_rate, merge, with_window_rates
from tcpwizard.measure.farends.common import Unaudited, port_probe
from tcpwizard.measure.farends.interface import (
    NO_HOOKS,
    Abilities,
    FarEndKind,
    Progress,
    TransferHooks,
    TransferOptions,
)
from tcpwizard.measure.model import Mode, ModeResult, PathEstimate, ReceiverView, TransferResult
from tcpwizard.measure.observe.handshake import HandshakeFacts, read_handshake
from tcpwizard.measure.observe.tcpinfo import read_tcp_info
from tcpwizard.measure.probes.probe import Progress as ProbeProgress
from tcpwizard.measure.wire import spec
from tcpwizard.measure.wire.protocol import PeerUnavailable

URL_MODES: tuple[Mode, ...] = ("untuned", "autotune", "static", "overprovisioned", "drs")
MAX_REDIRECTS = 5
HEAD_LIMIT = 64 * 1024  # a response head longer than this is not a web server's
VIEW_INTERVAL_S = 0.1


class UrlError(Unavailable):
    """The URL cannot be downloaded (bad URL, DNS, TLS, HTTP status): one line, exit 3."""


@dataclass(frozen=True)
class Url:
    scheme: str  # "http" | "https"
    host: str
    port: int
    target: str  # path and query, as sent in the request line
    text: str

    @property
    def tls(self) -> bool:
        return self.scheme == "https"


def is_url(text: str) -> bool:
    return text.strip().lower().startswith(("http://", "https://"))


def parse_url(text: str) -> Url:
    parts = urllib.parse.urlsplit(text.strip())
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise UrlError(f"{text!r}: only http:// and https:// URLs can be checked")
    if not parts.hostname:
        raise UrlError(f"{text!r}: the URL names no host")
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise UrlError(f"{text!r}: the port is not a number from 1 to 65535") from None
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return Url(scheme, parts.hostname, port, target, text.strip())


def _host_header(url: Url) -> str:
    host = f"[{url.host}]" if ":" in url.host else url.host
    default = 443 if url.tls else 80
    return host if url.port == default else f"{host}:{url.port}"


def request_bytes(url: Url, nbytes: int | None) -> bytes:
    """GET with identity encoding (bytes on the wire are the file's), `Connection: close`,
    and a Range when only so many bytes are wanted."""
    lines = [
        f"GET {url.target} HTTP/1.1",
        f"Host: {_host_header(url)}",
        f"User-Agent: tcpwizard/{__version__} (check URL)",
        "Accept: */*",
        "Accept-Encoding: identity",
        "Connection: close",
    ]
    if nbytes is not None:
        lines.append(f"Range: bytes=0-{max(0, nbytes - 1)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


@dataclass(frozen=True)
class Head:
    status: int
    reason: str
    location: str | None
    body_start: int  # body bytes already read with the head


def parse_head(raw: bytes) -> Head:
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode("iso-8859-1").split("\r\n")
    fields = lines[0].split(" ", 2)
    if len(fields) < 2 or not fields[0].startswith("HTTP/") or not fields[1].isdigit():
        raise UrlError(f"the server did not answer HTTP ({lines[0][:60]!r})")
    location = None
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "location":
            location = value.strip()
    return Head(int(fields[1]), fields[2] if len(fields) > 2 else "", location, len(rest))


class _Conn:
    """One HTTP(S) connection: TCP socket, optional TLS over memory BIOs, the head read."""

    def __init__(self, url: Url, address: str, plan: datapath.BufferPlan | None, timeout: float):
        self.url = url
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.tls: ssl.SSLObject | None = None
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        try:
            if plan is not None:
                plan.presetup(self.sock)
            self.sock.settimeout(timeout)
            self.sock.connect((address, url.port))
            if plan is not None:
                plan.postsetup(self.sock, accepted=False)
        except OSError as exc:
            self.sock.close()
            raise UrlError(f"{url.text}: cannot connect to {address} port {url.port}: "
                           f"{exc.strerror or exc}") from None  # fmt: skip

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def _flush(self) -> None:
        data = self._out.read()
        if data:
            self.sock.sendall(data)

    def handshake(self) -> None:
        if not self.url.tls:
            return
        ctx = ssl.create_default_context()
        self.tls = ctx.wrap_bio(self._in, self._out, server_hostname=self.url.host)
        while True:
            try:
                self.tls.do_handshake()
                self._flush()
                return
            except ssl.SSLWantReadError:
                self._flush()
                data = self.sock.recv(65536)
                if not data:
                    raise UrlError(
                        f"{self.url.text}: TLS: the server closed the connection"
                    ) from None
                self._in.write(data)

    def send(self, data: bytes) -> None:
        if self.tls is None:
            self.sock.sendall(data)
            return
        self.tls.write(data)
        self._flush()

    def read_head(self) -> Head:
        raw = b""
        while b"\r\n\r\n" not in raw:
            if len(raw) > HEAD_LIMIT:
                raise UrlError(f"{self.url.text}: the response head is longer than 64 KB")
            chunk = self._recv()
            if not chunk:
                raise UrlError(f"{self.url.text}: the server closed before answering")
            raw += chunk
        return parse_head(raw)

    def _recv(self) -> bytes:
        if self.tls is None:
            return self.sock.recv(65536)
        while True:
            try:
                return self.tls.read(65536)
            except ssl.SSLWantReadError:
                data = self.sock.recv(65536)
                if not data:
                    return b""
                self._in.write(data)
            except ssl.SSLZeroReturnError:
                return b""


def _describe(url: Url, exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"{url.text}: TLS: certificate verify failed: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return f"{url.text}: TLS: {exc.reason or exc}"
    if isinstance(exc, TimeoutError):
        return f"{url.text}: the server did not answer in time"
    if isinstance(exc, OSError):
        return f"{url.text}: {exc.strerror or exc}"
    return f"{url.text}: {exc}"


def resolve_address(host: str) -> str:
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise UrlError(f"cannot resolve {host!r}: {exc}") from None
    return str(infos[0][4][0])


def open_download(
    url: Url,
    address: str,
    plan: datapath.BufferPlan | None,
    nbytes: int | None = None,
    timeout: float = 5.0,
) -> tuple[_Conn, Head]:
    """Connect, TLS, send the GET and read the head; UrlError on anything but 200/206."""
    conn = _Conn(url, address, plan, timeout)
    try:
        conn.handshake()
        conn.send(request_bytes(url, nbytes))
        head = conn.read_head()
    except UrlError:
        conn.close()
        raise
    except (OSError, ssl.SSLError) as exc:
        conn.close()
        raise UrlError(_describe(url, exc)) from None
    return conn, head


def follow(url: Url, address: str, timeout: float = 5.0) -> tuple[Url, str, tuple[str, ...]]:
    """The URL a download ends at, after redirects; (url, address, notes). A small ranged
    GET, closed after the head."""
    notes: list[str] = []
    for _ in range(MAX_REDIRECTS + 1):
        conn, head = open_download(url, address, None, nbytes=1, timeout=timeout)
        conn.close()
        if head.status in (301, 302, 303, 307, 308) and head.location:
            nxt = parse_url(urllib.parse.urljoin(url.text, head.location))
            notes.append(f"{url.text} redirects ({head.status}) to {nxt.text}")
            if nxt.host != url.host:
                address = resolve_address(nxt.host)
            url = nxt
            continue
        if head.status not in (200, 206):
            raise UrlError(f"{url.text}: HTTP {head.status} {head.reason}".rstrip())
        return url, address, tuple(notes)
    raise UrlError(f"{url.text}: more than {MAX_REDIRECTS} redirects")


# ---------------------------------------------------------------------------- transfer


class _ViewSampler:
    """TCP_INFO of our receiving socket every 100 ms: the window we offered, what arrived,
    the receiver's RTT estimate, segments out of order."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.max_rcv_wnd = 0
        self.rcv_rtt_us: list[int] = []
        self.first_ooo: int | None = None
        self.last_ooo = 0
        self.rcv_mss = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(VIEW_INTERVAL_S):
            try:
                info = read_tcp_info(self.sock)
            except OSError:
                return
            self.max_rcv_wnd = max(self.max_rcv_wnd, info.get("rcv_wnd") or 0)
            if info.get("rcv_rtt"):
                self.rcv_rtt_us.append(info["rcv_rtt"])
            ooo = info.get("rcv_ooopack") or 0
            self.first_ooo = ooo if self.first_ooo is None else self.first_ooo
            self.last_ooo = ooo
            self.rcv_mss = info.get("rcv_mss") or self.rcv_mss

    def view(self) -> ReceiverView:
        rtts = sorted(self.rcv_rtt_us)
        return ReceiverView(
            max_rcv_wnd=self.max_rcv_wnd,
            rcv_rtt_us=rtts[len(rtts) // 2] if rtts else 0,
            ooo_packets=self.last_ooo - (self.first_ooo or 0),
            rcv_mss=self.rcv_mss,
            rcv_rtt_high_us=rtts[(9 * len(rtts)) // 10] if rtts else 0,
        )


def download_mode(
    url: Url,
    address: str,
    mode: Mode,
    options: TransferOptions,
    hooks: TransferHooks = NO_HOOKS,
) -> tuple[ModeResult, HandshakeFacts | None]:
    """One download in `mode` (our receive buffer as the mode plans it)."""
    progress, sysctl_root, cancel = hooks.progress, hooks.sysctl_root, hooks.cancel
    limits = buffers.read_host_limits(sysctl_root)
    force = options.force and buffers.can_force()
    try:
        plan = datapath.plan_buffers(mode, limits, options.static_request, force)
    except datapath.TransferError as exc:
        return _failed(mode, str(exc)), None
    duration = options.duration_s if options.nbytes is None else None
    try:
        conn, head = open_download(url, address, plan, options.nbytes)
    except UrlError as exc:
        return _failed(mode, str(exc)), None
    hs = read_handshake(conn.sock, port=url.port, sysctl_root=sysctl_root)
    if head.status not in (200, 206):
        conn.close()
        return _failed(mode, f"HTTP {head.status} {head.reason}"), hs
    stop = threading.Event()
    received = [0]
    started = time.monotonic()

    live = rates.LiveRate()

    def on_sample(s: datapath.SideSample) -> None:
        received[0] = s.bytes
        if cancel is not None and cancel.is_set():
            stop.set()
        if progress is not None:
            rate = live_rate(live, s)
            progress(Progress(mode, "down", "sample", s.t, s.bytes, rate, duration, options.nbytes))

    def over() -> bool:
        if options.nbytes is not None:
            return received[0] >= options.nbytes
        return duration is not None and time.monotonic() - started >= duration

    def timer() -> None:
        while not stop.is_set() and not over():
            time.sleep(0.01)
        stop.set()
        with contextlib.suppress(OSError):
            conn.sock.shutdown(socket.SHUT_RD)  # the test needs no more: close, not read on

    if progress is not None:
        progress(Progress(mode, "down", "start", 0.0, 0, 0.0, duration, options.nbytes))
    view = _ViewSampler(conn.sock)
    view.thread.start()
    threading.Thread(target=timer, daemon=True).start()
    try:
        local = datapath.run_receiver(
            [conn.sock],
            plan=plan,
            sample_interval=options.sample_interval_s,
            stall_timeout=options.stall_timeout_s,
            max_seconds=(duration or spec.BYTE_LIMITED_MAX_S) + options.stall_timeout_s,
            stop=stop,
            on_sample=on_sample,
        )
    finally:
        stop.set()
        view.stop.set()
        view.thread.join(timeout=1.0)
        conn.close()
    # A connection we shut down ourselves ends without error: the test had what it needed.
    if local.error and stop.is_set() and over():
        local.error = None
    result = merge(mode, "down", 1, None, local, local.error)
    notes = (*result.notes, f"HTTP {head.status} from {url.text}" + (" (TLS)" if url.tls else ""))
    result = _with_view(result, view.view(), notes)
    if progress is not None:
        progress(
            Progress(
                mode,
                "down",
                "done",
                result.seconds,
                result.bytes,
                result.throughput_mbps,
                duration,
                options.nbytes,
                result,
            )
        )
    return result, hs


def _with_view(result: ModeResult, view: ReceiverView, notes: tuple[str, ...]) -> ModeResult:
    # The congestion control that matters is the sender's, which a web server keeps. No
    # sender's RTT here: the rates' windows are the receiver's estimate of a round trip.
    rtt_s = view.rcv_rtt_us / 1e6 if view.rcv_rtt_us > 0 else None
    samples = tuple(with_window_rates(result.samples, rtt_s))
    return dataclasses.replace(
        result, samples=samples, receiver_view=view, notes=notes, congestion_control=""
    )


def _failed(mode: Mode, error: str) -> ModeResult:
    return ModeResult(mode, "down", 1, 0, 0.0, 0.0, 0, 0, (), error=error)


def _local_cc(sysctl_root: str) -> str:
    try:
        with open(f"{sysctl_root}/net/ipv4/tcp_congestion_control", encoding="ascii") as fh:
            return fh.read().strip()
    except (OSError, UnicodeDecodeError):
        return ""


# ---------------------------------------------------------------------------- far end


class UrlFar(Unaudited):
    """A web server: downloads of the URL (it only sends), its TCP options from the
    handshake, RTT and capacity from peerless probes toward its port."""

    kind: FarEndKind = "url"
    abilities = Abilities(False, False, (), URL_MODES, False, down_sizes_itself=True)
    program = "a web server"

    def __init__(self, url_text: str, address: str, host: str, sysctl_root: str) -> None:
        first = parse_url(url_text)
        self.url, self.address, self.notes = follow(first, address)
        self.host = host
        self.port: int | None = self.url.port
        self.sysctl_root = sysctl_root
        self._handshake: HandshakeFacts | None = None

    def describe(self) -> str:
        return f"web server at {self.url.text} ({'HTTPS' if self.url.tls else 'HTTP'})"

    def probe(self, budget_s: float, progress: ProbeProgress | None = None) -> PathEstimate:
        return port_probe(self.address, self.port, budget_s, progress)

    def transfer(self, options: TransferOptions, hooks: TransferHooks = NO_HOOKS) -> TransferResult:
        if "down" not in options.directions():
            raise PeerUnavailable("a web server only sends: check URL measures downloads")
        results: list[ModeResult] = []
        for mode in options.modes_for("down"):
            if hooks.cancel is not None and hooks.cancel.is_set():
                break
            result, hs = download_mode(self.url, self.address, mode, options, hooks)
            self._handshake = self._handshake or hs
            results.append(result)
        return TransferResult(tuple(results), "down", 1, "", _local_cc(hooks.sysctl_root))

    def missing(self) -> tuple[str, ...]:
        return (
            "the far end's settings (a web server does not report them)",
            "uploads (a web server only sends) and the sender's TCP_INFO: downloads are "
            "judged from our receiving socket",
        )
