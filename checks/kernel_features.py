"""What this kernel was built with, read without changing anything: whether a queueing
discipline exists at all. A fix that names a qdisc the kernel lacks fails when applied
(`tc` answers "Specified qdisc kind is unknown"), so the audit must know before it advises.

Evidence, strongest first: the module is loaded (/sys/module/sch_KIND); the kernel's own
configuration (/proc/config.gz, else /boot/config-RELEASE) says CONFIG_NET_SCH_KIND is y or
m, or "is not set"; the module tree lists it (modules.builtin, or a sch_KIND.ko file).
None when nothing can be read (a container without /proc/config.gz or /lib/modules).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path


def _config_lines(proc_root: str, boot_root: str, release: str) -> list[str] | None:
    try:
        with gzip.open(Path(proc_root, "config.gz"), "rt", errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        pass
    try:
        return Path(boot_root, f"config-{release}").read_text(errors="replace").splitlines()
    except OSError:
        return None


def qdisc_available(
    kind: str,
    *,
    proc_root: str = "/proc",
    sys_root: str = "/sys",
    boot_root: str = "/boot",
    modules_root: str = "/lib/modules",
    release: str | None = None,
) -> bool | None:
    """True/False when this kernel has (lacks) the qdisc `kind` ("fq", "netem"...)."""
    module = f"sch_{kind}"
    if Path(sys_root, "module", module).exists():
        return True
    rel = release or os.uname().release
    lines = _config_lines(proc_root, boot_root, rel)
    if lines is not None:
        option = f"CONFIG_NET_SCH_{kind.upper()}"
        for line in lines:
            if line.startswith(f"{option}=") and line.split("=", 1)[1] in ("y", "m"):
                return True
            if line.strip() == f"# {option} is not set":
                return False
    tree = Path(modules_root, rel)
    if not tree.is_dir():
        return None
    try:
        builtin = Path(tree, "modules.builtin").read_text(errors="replace")
    except OSError:
        builtin = ""
    if f"/{module}.ko" in builtin:
        return True
    return any(tree.glob(f"kernel/net/sched/{module}.ko*"))
