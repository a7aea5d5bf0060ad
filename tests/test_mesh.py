"""A mesh that never measures itself, without a network: the round-robin schedule, the host
lock, serve's "busy, retry after N s" over loopback, and an exporter that waits its turn."""

from __future__ import annotations

import contextlib
import io
import itertools
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tcpwizard.context import Context
from tcpwizard.exitcodes import UsageError
from tcpwizard.exporter import Exporter, Target, parse_targets
from tcpwizard.measure.serve.hostlock import MAX_RETRY_S, MIN_RETRY_S, HostLock, ask_serve
from tcpwizard.measure.serve.server import RESERVATION_GRACE_S, Server
from tcpwizard.mesh import plan_for, rounds, schedule
from tests.serve_helpers import in_thread


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8])
def test_round_robin_covers_every_ordered_pair_once_without_sharing_a_host(n: int) -> None:
    hosts = [f"h{i}" for i in range(n)]
    plan = rounds(hosts)
    pairs = [p for r in plan for p in r]
    assert sorted(pairs) == sorted(itertools.permutations(hosts, 2))
    for r in plan:
        busy = [h for p in r for h in p]
        assert len(busy) == len(set(busy)), r
    assert len(plan) == 2 * (n - 1 + n % 2)


def test_round_robin_is_the_same_whatever_the_order_of_the_file() -> None:
    assert rounds(["c", "a", "d", "b"]) == rounds(["a", "b", "c", "d"])
    with pytest.raises(UsageError):
        rounds(["a", "a"])
    with pytest.raises(UsageError):
        rounds(["a"])


def test_slots_of_every_exporter_never_overlap_on_a_host() -> None:
    mesh = parse_targets("10.0.0.1:5301\n10.0.0.2:5301\n10.0.0.3:5301\n10.0.0.4:5301\n")
    plans = [plan_for(mesh, t.host, 60.0) for t in mesh]
    assert plans[0].slot_s == 10.0
    starts: dict[float, list[tuple[str, str]]] = {}
    for p in plans:
        assert sorted(p.offsets) == sorted(t.name for t in p.targets)
        assert p.me.name not in p.offsets
        for far, off in p.offsets.items():
            starts.setdefault(off, []).append((p.me.name, far))
    assert sorted(starts) == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]
    for checks in starts.values():
        hosts = [h for c in checks for h in c]
        assert len(hosts) == len(set(hosts)) == 4
    assert [s.offset_s for s in schedule(["a", "b"], 10.0)] == [0.0, 5.0]
    with pytest.raises(UsageError, match="not a host of the mesh"):
        plan_for(mesh, "10.0.0.9", 60.0)


def test_exporter_starts_mesh_checks_at_their_wall_clock_offsets() -> None:
    targets = [Target("b", 1), Target("c", 1)]
    ex = Exporter(
        targets,
        60.0,
        lambda t: {},
        clock=lambda: 1000.0,
        offsets={"b:1": 10.0, "c:1": 40.0},
        wall=lambda: 6025.0,  # 25 s into an interval (6000 = 100 x 60)
    )
    due = {t.name: d for d, t in ex.schedule(1000.0)}
    assert due == {"b:1": 1045.0, "c:1": 1015.0}  # b's slot of the next interval


def test_exporter_counts_unhealthy_checks_in_a_row() -> None:
    verdicts = iter(["receiver-window", "receiver-window", None, "path-capacity", "congestion"])

    def check(t: Target) -> Mapping[str, Any]:
        v = next(verdicts)
        if v is None:
            return {"exit_code": 3, "busy_waits": 2}
        return {"exit_code": 1, "verdict": {"limiting_factor": v}, "measured": True}

    ex = Exporter([Target("b", 1)], 60.0, check)
    seen = []
    for _ in range(5):
        ex.run_one(ex.targets[0])
        samples = {s.name: s.value for fam in ex.collect() for s in fam.samples}
        seen.append(samples["tcpwizard_unhealthy_streak_checks"])
    assert seen == [1, 2, 2, 0, 1]  # a failed check neither extends nor ends the streak
    assert samples["tcpwizard_busy_waits_total"] == 2
    assert samples["tcpwizard_measured"] == 1
    assert samples["tcpwizard_exporter_interval_seconds"] == 60


def test_host_lock_is_exclusive_and_says_when_to_come_back(tmp_path: Path) -> None:
    path = str(tmp_path / "measure.lock")
    mine, theirs = HostLock(path), HostLock(path)
    assert mine.try_acquire("near", 12.0)
    assert not theirs.try_acquire("other", 5.0)
    assert 10.0 < theirs.retry_after() <= 12.0
    mine.extend("near", 500.0)
    assert theirs.retry_after() == MAX_RETRY_S
    mine.release()
    assert theirs.retry_after() == MIN_RETRY_S
    assert theirs.try_acquire("other", 5.0)
    theirs.release()


def _acquired_within(lock: HostLock, seconds: float) -> bool:
    """The lock taken within `seconds` (well under serve's grace period, RESERVATION_GRACE_S)."""
    deadline = time.monotonic() + seconds
    while not lock.try_acquire("exporter", 8.0):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _answered_within(port: int, seconds: float) -> bool:
    """serve takes a check within `seconds` of the lock's release (a loaded machine has
    been seen to refuse right after it; well under the exporter's retry, MIN_RETRY_S)."""
    deadline = time.monotonic() + seconds
    while ask_serve("127.0.0.1", port) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@contextlib.contextmanager
def _serve(lock: HostLock) -> Iterator[Server]:
    server = Server(bind="127.0.0.1", port=0, log=lambda m: None, host_lock=lock)
    with in_thread(server):
        yield server


def test_serve_with_a_lock_is_busy_while_its_host_measures(tmp_path: Path) -> None:
    path = str(tmp_path / "measure.lock")
    exporter_side = HostLock(path)
    with _serve(HostLock(path)) as srv:
        assert ask_serve("127.0.0.1", srv.port) is None  # free: the hello is answered
        # serve now keeps the host for 127.0.0.1 a few seconds (its next connection)...
        assert not exporter_side.try_acquire("exporter", 10.0)
        # ...and the same client is let in again meanwhile
        assert ask_serve("127.0.0.1", srv.port) is None
        # the client says its check is over: the host is free as soon as serve's threads of
        # its closed connections are done (they may not have noticed the close yet), not
        # after the grace period
        assert ask_serve("127.0.0.1", srv.port, release=True) is None
        assert _acquired_within(exporter_side, 1.0)
        # this host's exporter measures: serve refuses, saying when to come back
        after = ask_serve("127.0.0.1", srv.port)
        assert after is not None and 6.0 <= after <= 8.0
        exporter_side.release()
        assert _answered_within(srv.port, 1.0)
        # a client that never says so loses the host after the grace period
        t0 = time.monotonic()
        while not exporter_side.try_acquire("exporter", 8.0):
            assert time.monotonic() - t0 < 10, "serve never let the host lock go"
            time.sleep(0.1)
        assert time.monotonic() - t0 >= RESERVATION_GRACE_S - 0.5
        exporter_side.release()


def test_exporter_waits_for_a_busy_far_end_instead_of_predicting(tmp_path: Path) -> None:
    from tcpwizard.commands.exporter import Turns, check_target

    far_lock = HostLock(str(tmp_path / "far.lock"))
    assert far_lock.try_acquire("someone-else", 2.0)  # the far end is measuring
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        far_lock.release()  # ...and it is done by the time we come back

    err = io.StringIO()
    ctx = Context(stderr=err)
    near = Turns(HostLock(str(tmp_path / "near.lock")), "near", 5.0, 30.0, sleep)
    with _serve(HostLock(str(tmp_path / "far.lock"))) as srv:
        check = check_target(ctx, quick=True, record=False, turns=near)
        doc = check(Target("127.0.0.1", srv.port))
    said = err.getvalue()
    # The first wait is the one the far end asked for. A loaded CI machine has been seen to
    # refuse later tries as well (serve's flock failing for seconds after the holder's
    # release; not reproduced here, cause not found): waiting again is still not predicting,
    # so each wait must be for the far end, and counted.
    assert slept and 1.0 <= slept[0] <= 3.0, (slept, said)
    assert doc["busy_waits"] == len(slept), (slept, said)
    assert said.count(" is busy, checking ") == len(slept), said
    assert "this host is busy" not in said, said
    # The check ran once the far end was free: measured, not predicted.
    assert doc["measured"] is True
    assert not any("server busy" in str(n) for n in doc.get("notes") or [])
    assert doc["mesh"]["started"] <= doc["mesh"]["finished"]
    assert not near.lock or not near.lock.held


def test_exporter_gives_up_on_a_far_end_busy_for_too_long(tmp_path: Path) -> None:
    from tcpwizard.commands.exporter import Turns, check_target

    far_lock = HostLock(str(tmp_path / "far.lock"))
    assert far_lock.try_acquire("someone-else", 60.0)
    clock = [0.0]
    near = Turns(None, "near", 5.0, 0.0, lambda s: clock.append(s))
    with _serve(HostLock(str(tmp_path / "far.lock"))) as srv:
        doc = check_target(Context(stderr=io.StringIO()), quick=True, record=False, turns=near)(
            Target("127.0.0.1", srv.port)
        )
    far_lock.release()
    assert doc["exit_code"] == 3
    assert "stayed busy" in doc["error"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "either --targets FILE or --mesh FILE --self HOST"),
        (["--targets", "T", "--mesh", "M", "--self", "a:1"], "either --targets"),
        (["--mesh", "M"], "--mesh needs --self HOST"),
        (["--targets", "T", "--self", "a:1"], "--self goes with --mesh"),
        (["--mesh", "M", "--self", "10.0.0.9"], "not a host of the mesh"),
    ],
)
def test_exporter_mesh_usage_errors_are_one_line_exit_64(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    from tcpwizard.main import main

    (tmp_path / "M").write_text("10.0.0.1:5301\n10.0.0.2:5301\n")
    (tmp_path / "T").write_text("10.0.0.2:5301\n")
    argv = [str(tmp_path / a) if a in ("M", "T") else a for a in argv]
    assert main(["exporter", "--listen", "127.0.0.1:0", *argv]) == 64
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_release_asked_while_a_connection_closes_frees_the_host_at_once(tmp_path: Path) -> None:
    """The exporter's release can overtake serve's noticing that the check's connections
    closed: serve then lets go the moment the last one is done, not after the grace."""
    import socket

    from tcpwizard.measure.wire.protocol import encode

    path = str(tmp_path / "measure.lock")
    with _serve(HostLock(path)) as srv:
        ctl = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        ctl.sendall(encode({"type": "hello", "version": 1, "versions": [1]}))
        assert b'"hello"' in ctl.recv(4096)  # a session of the check is open
        assert ask_serve("127.0.0.1", srv.port, release=True) is None
        other = HostLock(path)
        assert not other.try_acquire("exporter", 5.0)  # still in use
        ctl.close()
        t0 = time.monotonic()
        while not other.try_acquire("exporter", 5.0):
            assert time.monotonic() - t0 < RESERVATION_GRACE_S - 0.5, "waited for the grace"
            time.sleep(0.05)
        other.release()
