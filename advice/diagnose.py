"""From evidence to one verdict.

The order of reasoning follows how a wizard works a slow path: first rule out a healthy path
(the network itself is the limit), then read what the sender's kernel says held it back
(TCP_INFO chrono counters: rwnd-limited, sndbuf-limited, busy — NDT's heuristics did the same
with web100), cross-check against the window law (window / RTT) and the Mathis bound, and only
then fall back on predictions from the configuration alone. Each rule returns a candidate with
a confidence; the most confident one is the verdict. The rules live in advice/rules/, one
module per limiting factor; this engine walks them in the order of advice/rules/registry.py
(`RULES`), which decides ties, and selects, calibrates and builds the Diagnosis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from tcpwizard.advice import calibration
from tcpwizard.advice.capacity_view import capacity as _capacity
from tcpwizard.advice.capacity_view import steady_mbps
from tcpwizard.advice.evidence import HEALTHY_SHARE
from tcpwizard.advice.evidence import Candidate as _Candidate
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import Evidence as Evidence  # re-exported: the engine's input
from tcpwizard.advice.evidence import directions as _directions
from tcpwizard.advice.middlebox import device_fix, syn_tampering
from tcpwizard.advice.model import ConfidenceBasis, Verdict, WizardGap
from tcpwizard.advice.rules import bufferbloat, host_cpu, policer, policer_both_ways
from tcpwizard.advice.rules.registry import RULES
from tcpwizard.advice.streams import streams_fix
from tcpwizard.advice.window_law import (
    UNSCALED_WINDOW,
    max_receive_window,
    max_send_window,
    window_limit_mbps,
)
from tcpwizard.checks.model import Fix, HostRole
from tcpwizard.measure.engine.line_filled import GAP_STEP
from tcpwizard.units import format_mbps as _fmt

# A limit named with less confidence loses to "the hosts allow the capacity" (one value,
# shared with the calibration's evidence situations).
WEAK = calibration.WEAK
PATH_GAP = {"bufferbloat": "path-capacity"}


@dataclass(frozen=True)
class Diagnosis:
    verdict: Verdict
    fixes: tuple[Fix, ...]  # only those that answer the limiting factor, for the right host


WINDOW_FACTORS = ("receiver-window", "sender-buffer", "window-scaling")


def _gap(
    ev: Evidence, dirs: Sequence[_Direction], factor: str, direction: str | None = None
) -> WizardGap:
    """Current vs tuned throughput of the verdict's direction (the slowest one if the
    verdict has none)."""
    named = [d for d in dirs if d.current and d.name == direction]
    worst = (
        named[0]
        if named
        else min(
            (d for d in dirs if d.current),
            key=lambda d: d.current.throughput_mbps if d.current else 0.0,
            default=None,
        )
    )
    if worst is None or worst.current is None:
        return _predicted_gap(ev, factor)
    if factor in ("path-capacity", "cross-traffic"):
        # Healthy, or shared: the rates once up to speed (a short test's ramp is not a gap;
        # on a shared path the tuned side is what a tuned mode measured there, never the
        # capacity others take).
        now = steady_mbps(worst.current)
        tuned = steady_mbps(worst.best) if worst.best else now
        if worst.best is None or tuned <= now:
            return WizardGap(now, now, True, worst.current.mode)
        return WizardGap(now, tuned, True, worst.best.mode)
    current = worst.current.throughput_mbps
    cap = _capacity(ev, worst)
    # The tuned side: what the best tuned mode held once up to speed. Each mode's test ends
    # when its own rate settles (measure/engine/steady.py), so a mode that settles sooner (DRS,
    # sized from the BDP) carries more of the common slow start in its whole-run average.
    held = [
        (steady_mbps(m), m)
        for m in (ev.transfer.modes if ev.transfer else ())
        if m.error is None and m.direction == worst.name and m.mode != "untuned"
    ]
    if held:
        rate, mode = max(held, key=lambda t: t[0])
        if rate > GAP_STEP * current:
            return WizardGap(current, rate, True, mode.mode)
    return WizardGap(current, cap, False)


def _predicted_gap(ev: Evidence, factor: str) -> WizardGap:
    if ev.path is None or ev.path.capacity is None or ev.path.rtt.min <= 0:
        return WizardGap()
    rtt, cap = ev.path.rtt.min, ev.path.capacity.mbps
    window = {
        "receiver-window": max_receive_window(ev.local),
        "sender-buffer": max_send_window(ev.local),
        "window-scaling": UNSCALED_WINDOW,
    }.get(factor)
    if window is None:
        return WizardGap()
    return WizardGap(min(cap, window_limit_mbps(window, rtt)), cap, False)


def fixes_for(ev: Evidence, factor: str, host: HostRole | None) -> tuple[Fix, ...]:
    """The fixes for the named host that declare they answer this factor."""
    if host is None:
        return ()
    pools: list[tuple[Fix, ...]] = []
    if host in ("local", "both"):
        pools.append(ev.local_fixes)
    if host in ("peer", "both"):
        pools.append(ev.peer_fixes)
    chosen: list[Fix] = []
    for pool in pools:
        chosen.extend(f for f in pool if factor in f.answers and f not in chosen)
    if any(f.kind == "route" for f in chosen):
        # A route clamp caps every socket, whatever buffer the application asks for.
        chosen = [f for f in chosen if f.kind != "setsockopt"]
    return tuple(chosen)


def _audit_only(ev: Evidence) -> Diagnosis:
    worst = [f for f in ev.local.findings if f.severity == "crit"] or [
        f for f in ev.local.findings if f.severity == "warn"
    ]
    evidence = tuple(f.message for f in worst[:5])
    why = "no path was measured, so no single limiting factor can be named; " + (
        f"{len(worst)} setting(s) would limit a long fat path." if worst else "settings look fine."
    )
    return Diagnosis(
        Verdict("unknown", 0.0, "local" if worst else None, why, evidence, WizardGap()),
        ev.local_fixes,
    )


def _unexplained(ev: Evidence, dirs: Sequence[_Direction], slow_dirs: set[str]) -> Diagnosis:
    """No rule explains what was measured: `unknown`, with the slow ways' numbers."""
    shown = [d for d in dirs if d.current and (not slow_dirs or d.name in slow_dirs)]
    evidence = tuple(
        f"{d.name}: {d.current.mode} {_fmt(d.current.throughput_mbps)}"
        + (f" of {_fmt(cap)} capacity" if (cap := _capacity(ev, d)) else "")
        for d in shown
        if d.current
    )
    why = "no rule explains the measured throughput; the evidence is shown as measured."
    if not ev.measured and (failed := _failures(ev)):
        # Nothing moved: say what stopped the transfers rather than "as measured".
        why = f"not measured: {_not_run(ev)}, so no limiting factor can be named."
        evidence = (*evidence, *(f"missing: {e}" for e in failed))
    slowest = min(
        shown, key=lambda d: d.current.throughput_mbps if d.current else 0.0, default=None
    )
    slow = slowest.name if slow_dirs and slowest else None
    return Diagnosis(
        Verdict("unknown", 0.2, None, why, evidence, _gap(ev, dirs, "unknown", slow)), ()
    )


def _silent_far_end(ev: Evidence, c: _Candidate) -> Diagnosis:
    """The far end's process did not run: the verdict says so, with what stopped the
    transfers; nothing was measured, so there is no gap to show."""
    evidence = (*c.evidence, *(f"missing: {e}" for e in _failures(ev)))
    return Diagnosis(Verdict(c.factor, c.confidence, c.host, c.explanation, evidence), c.fixes)


def _failures(ev: Evidence) -> tuple[str, ...]:
    """What stopped the test transfers that failed, each once."""
    return tuple(
        dict.fromkeys(m.error for m in (ev.transfer.modes if ev.transfer else ()) if m.error)
    )


def _not_run(ev: Evidence) -> str:
    failed = _failures(ev)
    return f"every test transfer failed ({failed[0]})" if failed else "no test transfer ran"


def _predicted_healthy(
    ev: Evidence, dirs: Sequence[_Direction], best: _Candidate, missing: Sequence[str]
) -> Diagnosis:
    """Nothing was measured: settings that allow the capacity are no proof that the path
    is healthy, so the verdict stays unknown and says what it rests on."""
    why = (
        f"not measured: {_not_run(ev)}, so the limiting factor cannot be named; {best.explanation}"
    )
    failed = tuple(f"missing: {e}" for e in _failures(ev))
    evidence = (*best.evidence, *(f"missing: {m}" for m in missing), *failed)
    return Diagnosis(Verdict("unknown", 0.2, None, why, evidence, _gap(ev, dirs, "unknown")), ())


def _slower_way_first(
    ev: Evidence, dirs: Sequence[_Direction], limits: list[_Candidate]
) -> list[_Candidate]:
    """The limits of the way that moved the smaller share of its capacity: the factor that
    limits throughput most is the slower way's, however sure another way's rule is. Ways
    within the healthy share of each other (headers and sampling spread) count as alike;
    then every limit competes on its confidence."""
    limited = {c.direction for c in limits}
    shares: dict[str, float] = {}
    for d in dirs:
        cap = _capacity(ev, d)
        if d.name in limited and d.current is not None and cap:
            shares[d.name] = steady_mbps(d.current) / cap
    if len(shares) < 2:
        return limits
    slower = min(shares, key=lambda k: shares[k])
    faster = max(shares, key=lambda k: shares[k])
    if shares[slower] >= HEALTHY_SHARE * shares[faster]:
        return limits
    return [c for c in limits if c.direction == slower]


def _speak_for_both_ways(
    pool: Sequence[_Candidate], candidates: Sequence[_Candidate], healthy_dirs: set[str]
) -> tuple[_Candidate, HostRole | None, str, tuple[str, ...]]:
    """The most confident candidate, and what the other way adds to it: (candidate, host to
    fix, explanation, evidence)."""
    best = max(pool, key=lambda c: c.confidence)
    if all(c.factor == "path-capacity" for c in pool) and len({c.direction for c in pool}) > 1:
        # Healthy both ways: speak for the way the user asked about first (up), and show
        # the other way's rate beside it.
        best = next((c for c in pool if c.direction == "up"), best)
        other = next(c for c in pool if c.direction != best.direction)
        # The verdict claims both ways: it is as sure as the less sure of them, and that
        # way's reasons for doubt are shown (a download whose probe saw far more than it
        # moved, advice/capacity_view.py capacity_sure).
        doubted = other.confidence < best.confidence
        shown = other.evidence if doubted else other.evidence[:1]
        best = replace(best, confidence=min(best.confidence, other.confidence))
        return (
            best,
            best.host,
            best.explanation,
            (*best.evidence, *(f"{other.direction}: {e}" for e in shown)),
        )
    # The other way's own reading of the same factor: its most confident one (a weaker
    # candidate of the same factor there, with another host, is not what that way says).
    twin = max(
        (
            c
            for c in candidates
            if c.factor == best.factor
            and c.factor != "path-capacity"
            and c.direction != best.direction
            and c.direction not in healthy_dirs
            and c.confidence >= WEAK
        ),
        key=lambda c: c.confidence,
        default=None,
    )
    if (
        twin is not None
        and best.host in ("local", "peer")
        and twin.host in ("local", "peer")
        and twin.host != best.host
    ):
        # The same limit both ways, on each way's own host (both senders' tcp_wmem, say):
        # fixing one end leaves the other way as slow as before.
        return (
            best,
            "both",
            f"{best.explanation} {twin.direction}: the same limit at the {twin.host} end.",
            (*best.evidence, *(f"{twin.direction}: {e}" for e in twin.evidence[:1])),
        )
    return best, best.host, best.explanation, best.evidence


def _calibrated(ev: Evidence, best: _Candidate) -> tuple[float, ConfidenceBasis | None]:
    """The candidate's confidence as the scenario matrix measured its factor's verdicts,
    in the matrix's situation only: a peer audit and transfers."""
    table = calibration.table()
    record = table.record(best.factor, best.confidence)
    if record is None or ev.peer is None or not ev.measured:
        return best.confidence, None
    return (
        table.confidence(best.factor, best.confidence),
        ConfidenceBasis(best.confidence, record.runs, record.right),
    )


def diagnose(ev: Evidence) -> Diagnosis:
    dirs = _directions(ev)
    if not dirs or (ev.path is None and ev.transfer is None):
        return _audit_only(ev)
    if (silent := host_cpu.silent_far_end(ev)) is not None:
        return _silent_far_end(ev, silent)
    candidates = [c for d in dirs for rule in RULES if (c := rule(ev, d)) is not None]
    # A healthy direction does not excuse a slow one: prefer a real limit when one is found.
    healthy_dirs = {c.direction for c in candidates if c.decisive}
    slow_dirs = {d.name for d in dirs if d.current is not None and d.name not in healthy_dirs}
    limits = [
        c for c in candidates if c.factor != "path-capacity" and c.direction not in healthy_dirs
    ]
    healthy = [c for c in candidates if c.factor == "path-capacity"]
    strong_limits = [c for c in limits if c.confidence >= WEAK]
    if strong_limits:
        pool = _slower_way_first(ev, dirs, strong_limits)
    elif healthy_dirs and slow_dirs:
        # One way reached the capacity, the other did not: only the slow way's own (weak)
        # explanations may speak for it, never the healthy way's verdict.
        pool = [c for c in candidates if c.direction in slow_dirs]
    else:
        pool = [*limits, *healthy]
    if not pool:
        return _unexplained(ev, dirs, slow_dirs)
    best, host, explanation, found = _speak_for_both_ways(pool, candidates, healthy_dirs)
    if (bloat := bufferbloat.prefer(best, candidates)) is not best:
        best, host, explanation, found = bloat, bloat.host, bloat.explanation, bloat.evidence
    if (bucket := policer_both_ways.same_bucket(ev, best, candidates, dirs)) is not best:
        best, host, explanation, found = bucket, bucket.host, bucket.explanation, bucket.evidence
    found += bufferbloat.beside(best, candidates)
    confidence, basis = _calibrated(ev, best)
    missing = []
    if ev.peer is None:
        missing.append("no peer audit (the far end does not run `tcpwizard serve`)")
        confidence *= 0.8
    if not ev.measured:
        missing.append("no test transfer")
        confidence *= 0.7
        if best.factor == "path-capacity":
            return _predicted_healthy(ev, dirs, best, missing)
    evidence = found + tuple(f"missing: {m}" for m in missing)
    if best.factor in WINDOW_FACTORS and ev.measured and best.confidence >= WEAK:
        evidence += (
            "parallel streams would only hide this: every stream is held by the same "
            "window; fix the buffer instead",
        )
    verdict = Verdict(
        best.factor,
        round(confidence, 2),
        host,
        explanation,
        evidence,
        # A policer's or a queue's rate is what the path gives: no host setting raises it.
        policer.wizard_gap(best, dirs)
        or _gap(ev, dirs, PATH_GAP.get(best.factor, best.factor), best.direction),
        basis,
    )
    fixes = fixes_for(ev, best.factor, host)
    fixes += tuple(f for f in best.fixes if f not in fixes)
    if best.factor == "middlebox":
        fixes += (device_fix(syn_tampering(ev.peer_handshake, ev.peer)),)
    if best.factor == "congestion" and best.streams is not None:
        fixes += (streams_fix(*best.streams),)
    return Diagnosis(verdict, fixes)
