"""Where running labs are recorded: one JSON file per lab in a state directory.

The record is written as soon as the namespaces exist (before the emulator starts), so a lab
that failed half-way is still found and removed by `lab down --all` or the stale sweeper.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from typing import Any

from tcpwizard.lab.spec import LabSpec

DEFAULT_STATE_DIR = "/run/tcpwizard/lab"


@dataclass(frozen=True)
class LabRecord:
    name: str
    backend: str  # resolved: "delayline" or "netem"
    ns_a: str
    ns_b: str
    spec: LabSpec
    pid: int = 0  # the delay line process; 0 before it started or with netem
    owner_pid: int = 0  # a process whose exit makes the lab stale (test sessions); 0: none
    created: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "backend": self.backend,
            "ns_a": self.ns_a,
            "ns_b": self.ns_b,
            "spec": self.spec.to_json(),
            "pid": self.pid,
            "owner_pid": self.owner_pid,
            "created": self.created,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LabRecord:
        return cls(
            name=str(data["name"]),
            backend=str(data["backend"]),
            ns_a=str(data["ns_a"]),
            ns_b=str(data["ns_b"]),
            spec=LabSpec.from_json(data["spec"]),
            pid=int(data.get("pid", 0)),
            owner_pid=int(data.get("owner_pid", 0)),
            created=float(data.get("created", 0.0)),
        )


class StateDir:
    def __init__(self, path: str = DEFAULT_STATE_DIR) -> None:
        self.path = path

    def file(self, name: str, suffix: str = ".json") -> str:
        return os.path.join(self.path, name + suffix)

    def write(self, record: LabRecord) -> None:
        os.makedirs(self.path, mode=0o755, exist_ok=True)
        target = self.file(record.name)
        tmp = target + ".tmp"
        with open(tmp, "w") as f:
            json.dump(record.to_json(), f, indent=1)
        os.replace(tmp, target)

    def read(self, name: str) -> LabRecord | None:
        try:
            with open(self.file(name)) as f:
                return LabRecord.from_json(json.load(f))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            # A corrupt record still names a lab that may need removing.
            return None

    def names(self) -> list[str]:
        try:
            entries = os.listdir(self.path)
        except FileNotFoundError:
            return []
        return sorted(e[: -len(".json")] for e in entries if e.endswith(".json"))

    def records(self) -> list[LabRecord]:
        return [r for r in (self.read(n) for n in self.names()) if r is not None]

    def remove(self, name: str) -> None:
        for suffix in (".json", ".json.tmp", ".stats.json", ".stats.json.tmp", ".log"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.file(name, suffix))


def now() -> float:
    return time.time()
