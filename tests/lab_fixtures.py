"""pytest plugin: emulated WANs for end-to-end tests (loaded from tests/conftest.py).

    @pytest.mark.lab
    def test_transfer(lab: Lab) -> None:            # 100 Mbit/s, 50 ms RTT
        lab.run("b", ["iperf3", "-s", "-1", "-D"], check=True)
        ...

    @pytest.mark.lab
    @pytest.mark.parametrize("lab", [LabSpec.symmetric(10e6, 0.200, loss=0.01)], indirect=True)
    def test_lossy(lab: Lab) -> None: ...

    def test_two(lab_factory: LabFactory) -> None:
        rmem = (("net.ipv4.tcp_rmem", "4096 65536 65536"),)
        small = lab_factory(LabSpec.symmetric(50e6, 0.020, sysctls_b=rmem))

Labs are built on first use, cached by spec for the whole session (building one takes
~0.2 s) and removed at session end, also when tests fail. Each gets a unique name
(twt-<run id>-<n>), so concurrent pytest runs never collide; the delay line watches the
pytest process and removes its lab itself if the session is killed. After each test that
used `lab`, the programs it started inside the hosts are killed (ones running before it, such
as a session-scoped server, are kept). Without root the tests skip. A test must not change a
shared lab (sysctls...): put what it needs in the spec.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tcpwizard.lab import Lab, LabSpec

DEFAULT_SPEC = LabSpec.symmetric(rate_bps=100e6, rtt_s=0.050)
RUN_ID = uuid.uuid4().hex[:6]
LAB_FIXTURES = ("lab", "lab_factory")
# Labs removed at once at the session's end: each mostly waits (a delay line's exit, `ip`).
TEARDOWN_WORKERS = 8


def lab_unavailable() -> str | None:
    """Why lab tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces, TUN devices)"
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun"
    for tool in ("ip", "ping", "iperf3"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make system-deps)"
    return None


class LabFactory:
    """lab_factory(spec) -> a running Lab for that spec (spec.name is ignored)."""

    def __init__(self) -> None:
        self._labs: dict[LabSpec, Lab] = {}
        self._fresh: list[Lab] = []
        self._count = 0

    def fresh(self, spec: LabSpec) -> Lab:
        """A lab of its own, never shared, for a test that changes its hosts (a fix, a
        route): removed at session end like the others."""
        reason = lab_unavailable()
        if reason:
            pytest.skip(reason)
        self._count += 1
        lab = Lab(spec.with_name(f"twt-{RUN_ID}-{self._count}"), owner_pid=os.getpid())
        self._fresh.append(lab)
        return lab.up()

    def __call__(self, spec: LabSpec = DEFAULT_SPEC) -> Lab:
        reason = lab_unavailable()
        if reason:
            pytest.skip(reason)
        key = spec.with_name("")
        lab = self._labs.get(key)
        if lab is not None and lab.is_up:
            return lab
        if lab is not None:
            lab.down()  # it broke (a test killed its emulator): build it again
        self._count += 1
        lab = Lab(spec.with_name(f"twt-{RUN_ID}-{self._count}"), owner_pid=os.getpid())
        self._labs[key] = lab
        return lab.up()

    def close(self) -> None:
        """Every lab down, several at once: each waits on its own delay line's exit and
        its namespaces' removal (one by one, 40 labs took 19.5 s at the session's end)."""
        labs = [*self._labs.values(), *self._fresh]

        def down(lab: Lab) -> str | None:
            try:
                lab.down()
            except Exception as exc:  # keep removing the others
                return f"{lab.name}: {exc}"
            return None

        with ThreadPoolExecutor(max_workers=TEARDOWN_WORKERS) as pool:
            errors = [e for e in pool.map(down, labs) if e is not None]
        self._labs.clear()
        self._fresh.clear()
        if errors:
            raise RuntimeError("lab teardown failed: " + "; ".join(errors))


@pytest.fixture(scope="session")
def lab_factory() -> Iterator[LabFactory]:
    factory = LabFactory()
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def lab(request: pytest.FixtureRequest, lab_factory: LabFactory) -> Iterator[Lab]:
    """A running lab: DEFAULT_SPEC, or the LabSpec given with indirect parametrization."""
    spec = getattr(request, "param", DEFAULT_SPEC)
    if not isinstance(spec, LabSpec):
        raise TypeError(f"parametrize 'lab' with LabSpec values, not {type(spec).__name__}")
    built = lab_factory(spec)
    before = built.processes()
    yield built
    # Servers this test left behind must not answer the next one; programs that were
    # already running (a session-scoped server) stay.
    built.kill_processes(keep=before)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses a lab carries the `lab` marker (so `-m "not lab"` skips it);
    lab and netns tests measure over real TCP and are judged by the majority of their
    tries (tests/majority.py)."""
    for item in items:
        if set(getattr(item, "fixturenames", ())) & set(LAB_FIXTURES):
            item.add_marker(pytest.mark.lab)
        if item.get_closest_marker("lab") or item.get_closest_marker("netns"):
            item.add_marker(pytest.mark.measurement)
