"""The multigigabit verdict bench's cases: what each selection runs, and that every case's
path is set up as its name says (tuned both ends, one host's buffer cut, a starved serve)."""

from __future__ import annotations

import pytest

from benchmarks.bench_gigabit import CASES, MULTI_CASES, SMALL_BUFFER, select
from tcpwizard.exitcodes import UsageError


def test_each_selection_runs_its_own_set() -> None:
    assert select(["gigabit"]) == list(CASES)
    assert select(["multigigabit"]) == list(MULTI_CASES)
    assert [c.name for c in select(["multigigabit:cpu-starved-5000"])] == ["cpu-starved-5000"]
    assert len(select(["gigabit", "multigigabit"])) == len(CASES) + len(MULTI_CASES)
    with pytest.raises(UsageError, match="unknown multigigabit case"):
        select(["multigigabit:healthy-1000"])


def test_multigigabit_cases_are_the_paths_their_names_say() -> None:
    rates = sorted({c.rate_mbps for c in MULTI_CASES})
    assert rates == [2000.0, 5000.0]
    for case in MULTI_CASES:
        bdp = case.spec.forward.rate_bps / 8 * case.spec.forward.delay_s * 2
        maxima = {
            (host, key): int(value.split()[2])
            for host, sysctls in (("a", case.spec.sysctls_a), ("b", case.spec.sysctls_b))
            for key, value in sysctls
        }
        assert len(maxima) == 4  # both buffers on both hosts
        cut = [where for where, v in maxima.items() if v == SMALL_BUFFER]
        if case.name.startswith(("healthy", "cpu-starved")):
            assert not cut and min(maxima.values()) >= 4 * bdp
        else:
            expected = (
                ("b", "net.ipv4.tcp_rmem") if "rmem" in case.name else ("a", "net.ipv4.tcp_wmem")
            )
            assert cut == [expected] and bdp / 2 > SMALL_BUFFER
        assert (case.cpu_share_b is not None) == case.name.startswith("cpu-starved")
