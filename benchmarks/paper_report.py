"""Writes the outputs of `python -m benchmarks paper`: bench-paper.md, the JSON (already kept by the
ResultStore) and the PNG plots under img/."""

from __future__ import annotations

import os

from benchmarks.paper_matrix import Plan
from benchmarks.paper_plots import write_plots
from benchmarks.paper_results import ResultStore
from benchmarks.paper_table import checks, markdown, text_table

NOTES = """\
## How to read it

- **Throughput** is bytes received over the whole transfer, slow start included, as the
  papers time it (from the first stream's start to the last one's end). *steady* leaves out
  the first 0.25 s + 5 RTT (slow start) and the final drain; the window check uses it.
- **Untuned window**: the engine asks for `SO_RCVBUF = SO_SNDBUF = 65536`. Linux grants
  twice that (131,072 B) and advertises `sk_rcvbuf x skb->len/skb->truesize` = 0.614 x
  131,072 = 80,480 B (measured as `tcpi_snd_wnd`, docs/bench-calibrate.md), so the
  reference is N x 80,480 B / RTT, capped by the bottleneck's goodput (96.5 % of the rate).
- **default / raised limits**: the lab hosts get `tcp_rmem`/`tcp_wmem` maxima of 6 / 4 MB
  (Linux's own defaults) or 64 MB. `net.core.rmem_max` is global and read-only inside a
  namespace, so `setsockopt()` (static, over-provisioned, DRS) stays capped by the host's
  value; over-provisioned asks for exactly that cap.
- **static** asks for the BDP of the configured path (rate x RTT); Linux doubles it, so the
  buffer is 2 x BDP (64 KB at least).
- **iperf3** runs once per cell with the same buffers: `-w 64K`, no `-w` (autotuning),
  `-w BDP`, `-w rmem_max`; `-P N` for streams. DRS has no iperf3 equivalent. In `--quick`
  iperf3's `-t` is the run's length rounded up to whole seconds (iperf3 3.12 takes no
  fractions), so its slow start weighs a little less. At 100 ms iperf3 reads 5-15 % below
  the engine for large buffers: the engine's receiver counts until the last byte sent has
  arrived (the send buffer drains at full rate after the sender stops), iperf3's figure
  ends with its -t.
- **DRS against kernel autotuning**: DRS starts each stream from its share of the configured
  path's BDP (the transfer's `--rtt`/`--bandwidth`, as `check` passes its probe's) and
  settles at 2 x the BDP it measures. *DRS / it* is the whole-transfer ratio, which in
  duration-limited runs favours a large send buffer: autotune-raised's runs at 100 ms last
  3.0-3.5 s instead of 2.1 s, delivering what its send buffer holds at the full rate after
  the sender stops. *steady* leaves slow start and that drain out of both. At one stream
  DRS and static hold the same 2 x BDP, so neither moves more per MB than the other.
- **Max rcv buffer** is the receiver's largest `SO_RCVBUF` during the run, summed over the
  streams; *Mbit/s per MB* divides the throughput by it (Engelhart et al., Figure 9).
"""


def write_outputs(plan: Plan, store: ResultStore, out_dir: str) -> tuple[str, bool]:
    """Markdown and plots; returns the terminal table and whether every check passed."""
    os.makedirs(out_dir, exist_ok=True)
    write_plots(plan, store, os.path.join(out_dir, "img"))
    with open(os.path.join(out_dir, "bench-paper.md"), "w") as f:
        f.write(markdown(plan, store, NOTES))
    ok = all(c.ok for c in checks(plan, store))
    return text_table(plan, store), ok
