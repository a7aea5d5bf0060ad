"""Whether this kernel has a qdisc, from a fake /proc, /sys and /lib/modules; and the pacing
check that must not advise fq where the kernel cannot provide it."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

from tcpwizard.checks.kernel_features import qdisc_available
from tests.fakes import interface, network
from tests.test_checks import problems, run


def _roots(tmp: Path) -> dict[str, str]:
    for sub in ("proc", "sys/module", "boot", "modules"):
        (tmp / sub).mkdir(parents=True, exist_ok=True)
    return {
        "proc_root": str(tmp / "proc"),
        "sys_root": str(tmp / "sys"),
        "boot_root": str(tmp / "boot"),
        "modules_root": str(tmp / "modules"),
        "release": "6.18.0",
    }


def test_kernel_config_says_whether_fq_exists(tmp_path: Path) -> None:
    roots = _roots(tmp_path)
    assert qdisc_available("fq", **roots) is None  # nothing to read: cannot tell
    with gzip.open(tmp_path / "proc/config.gz", "wt") as f:
        f.write("CONFIG_NET_SCH_HTB=y\n# CONFIG_NET_SCH_FQ is not set\nCONFIG_NET_SCH_TBF=m\n")
    assert qdisc_available("fq", **roots) is False
    assert qdisc_available("htb", **roots) is True
    assert qdisc_available("tbf", **roots) is True  # a module: loadable on demand
    (tmp_path / "sys/module/sch_fq").mkdir()
    assert qdisc_available("fq", **roots) is True  # loaded beats the config


def test_module_tree_when_there_is_no_config(tmp_path: Path) -> None:
    roots = _roots(tmp_path)
    tree = tmp_path / "modules/6.18.0"
    (tree / "kernel/net/sched").mkdir(parents=True)
    (tree / "modules.builtin").write_text("kernel/net/sched/sch_htb.ko\n")
    (tree / "kernel/net/sched/sch_fq.ko.zst").write_bytes(b"")
    assert qdisc_available("htb", **roots) is True
    assert qdisc_available("fq", **roots) is True
    assert qdisc_available("netem", **roots) is False


def test_bbr_on_a_kernel_without_fq_says_so_and_advises_no_fq(tmp_path: Path) -> None:
    net = dataclasses.replace(network(interface(qdisc="pfifo_fast")), fq_available=False)
    a = run(tmp_path, {"net.core.default_qdisc": "pfifo_fast"}, net=net)
    assert problems(a) == {"pacing_qdisc": "info"}
    f = next(f for f in a.findings if f.id == "pacing_qdisc")
    assert "no fq qdisc" in f.observed and "CONFIG_NET_SCH_FQ" in f.message
    assert not [x for x in a.fixes if "fq" in x.command]
