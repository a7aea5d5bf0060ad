"""Robustness, input layer: the named bad-input cases and generated ones for every file the
tool reads and every argument type. Each ends in one stderr line and a documented exit code;
files the tool does not own are left as they were."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tcpwizard.advice.apply import BACKUP_NAME, FILE_NAME
from tcpwizard.checks.model import Fix
from tcpwizard.exitcodes import TcpWizardError
from tcpwizard.exporter import load_targets
from tcpwizard.measure.wire.auth import read_secret_file
from tcpwizard.output.json_format import fix_json
from tests.robustness_helpers import (
    DOCUMENTED,
    assert_clean_failure,
    fake_tree,
    run_cli,
    tree_digest,
)

WS_FIX = Fix("ws", "sysctl", "local", "net.ipv4.tcp_window_scaling", "1", "sysctl -w x=1")
FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _plan(path: Path, *fixes: Fix) -> Path:
    path.write_text(json.dumps({"fixes": [fix_json(f) for f in fixes]}))
    return path


# -- named cases: arguments -----------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["check", "127.0.0.1", "--port", "65536"], "1 to 65535"),
        (["check", "127.0.0.1", "--port", "-1"], "1 to 65535"),
        (["probe", "127.0.0.1", "--tcp-port", "70000"], "1 to 65535"),
        (["calc", "--rtt", "1e308s", "--bandwidth", "1gbit"], "no real path"),
        (["calc", "--rtt", "1e308m", "--bandwidth", "1gbit"], "too large"),
        (["calc", "--rtt", "-5ms", "--bandwidth", "1gbit"], "must be positive"),
        (["check", "--rtt", "-5ms"], "must be positive"),
        (["calc", "--rtt", "nan", "--bandwidth", "1gbit"], "duration"),
        (["calc", "--rtt", "10ms", "--bandwidth", "inf"], "rate"),
        (["check", "[::1", "--port", "1"], "unbalanced bracket"),
        (["probe", "http://example.org/x"], "not a host name"),
        (["serve", "--max-clients", "0"], "between 1 and 256"),
        (["serve", "--max-duration", "nan"], "seconds"),
        (["check", "--duration", "-3s", "127.0.0.1"], "must be positive"),
    ],
)
def test_named_argument_cases(argv: list[str], needle: str, tmp_path: Path) -> None:
    o = run_cli(argv, tmp_path)
    assert_clean_failure(o, 64)
    assert needle in o.err
    assert "tcpwizard: error: tcpwizard" not in o.err  # the program name once, not twice


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["up", "--rtt", "-5ms"], "argument --rtt: must be positive"),
        (["up", "--rtt", "nan"], "argument --rtt: cannot read duration"),
        (["up", "--jitter", "1e308m"], "argument --jitter: duration '1e308m' is too large"),
        (["up", "--rate", "inf"], "argument --rate: cannot read rate"),
        (["up", "--rate", "0"], "argument --rate: rate must be positive"),
        (["up", "--loss", "100%"], "argument --loss: must be below 100%"),
        (["up", "--loss", "-1%"], "argument --loss: must be positive"),
        (["up", "--mtu", "1e3"], "argument --mtu: must be a whole number of bytes from 576"),
        (["up", "--mtu", "65536"], "argument --mtu: must be a whole number of bytes from 576"),
        (["up", "--queue", "nanbdp"], "argument --queue: 'nanbdp': use a positive multiple"),
        (["up", "--queue", "-1"], "argument --queue: must be positive"),
        (["up", "--reverse", "delay=-1ms"], "argument --reverse: delay: must be positive"),
        (["up", "--reverse", "rtt=1ms"], "argument --reverse: 'rtt': use rate, delay"),
        (["up", "--hops", "17"], "argument --hops: must be between 0 and 16"),
        (["up", "--hops", "2", "--hop", "2:mtu=1000"], "argument --hop: mtu: must be"),
        (["up", "--hops", "2", "--hop", "3:rtt=1ms"], "argument --hop: hop 3: use 1-2"),
        (["up", "--sysctl", "a:kernel.panic=1"], "argument --sysctl: sysctl 'kernel.panic'"),
        (["up", "--name", "../../etc"], "argument --name: lab name '../../etc'"),
        (["exec", "--name", "../x", "a", "--", "true"], "argument --name: lab name"),
        (["down", "--name", "a b"], "argument --name: lab name"),
    ],
)
def test_named_lab_option_cases(
    argv: list[str], needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lab's flags follow the CLI's rules: refused while parsing, before anything is
    built (not root: a value let through would end in 77, never in a lab)."""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    o = run_cli(["lab", *argv], tmp_path)
    assert_clean_failure(o, 64)
    assert needle in o.err


@pytest.mark.parametrize("host", ["[::1]", "::1"])
def test_ipv6_with_or_without_brackets(host: str, tmp_path: Path) -> None:
    from tcpwizard.cli import build_parser

    for command in ("check", "probe", "transfer"):
        assert build_parser().parse_args([command, host]).host == "::1"
    assert build_parser().parse_args(["serve", "--bind", host]).bind == "::1"


def test_calc_at_100g_200ms_is_capped_with_a_note(tmp_path: Path) -> None:
    o = run_cli(["calc", "--rtt", "200ms", "--bandwidth", "100gbit", "--json"], tmp_path)
    assert o.code == 0
    calc = o.json()["calc"]
    assert calc["capped"] and "parallel streams" in calc["note"]
    for s in calc["sysctls"]:
        assert all(int(v) < 2**31 for v in s["value"].split())


# -- generated argument values ---------------------------------------------------------------

_TEXT = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    max_size=24,
)


@FUZZ
@given(value=st.one_of(_TEXT, st.from_regex(r"-?[0-9.eE+-]{1,12}(ms|s|us|m|gbit|kb)?")))
def test_generated_argument_values(value: str, tmp_path: Path) -> None:
    for argv in (
        ["calc", "--rtt", value, "--bandwidth", "1gbit"],
        ["calc", "--rtt", "10ms", "--bandwidth", value],
        ["probe", "127.0.0.1", "--tcp-port", value, "--budget", "0.1"],
        ["check", "--port", value, "--bytes", value],
    ):
        o = run_cli(argv, tmp_path)
        assert o.code in DOCUMENTED, (argv, o.err)
        assert "internal error" not in o.err, (argv, o.err)
        if o.code != 0:
            assert len(o.err.strip().splitlines()) == 1, (argv, o.err)


@FUZZ
@given(value=st.one_of(_TEXT, st.from_regex(r"-?[0-9.eE+-]{1,12}(ms|s|%|bdp|KB|mbit)?")))
def test_generated_lab_option_values(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # accepted values end in 77, not a lab
    for flags in (
        ["--rtt", value],
        ["--loss", value],
        ["--queue", value],
        ["--mtu", value],
        ["--reverse", f"rate={value},delay={value}"],
        ["--hops", "2", "--hop", f"2:rtt={value}"],
    ):
        o = run_cli(["lab", "up", "--name", "fuzz", *flags], tmp_path)
        assert o.code in (64, 77), (flags, o.err)
        assert len(o.err.strip().splitlines()) == 1, (flags, o.err)


# -- named cases: files ---------------------------------------------------------


def _fix_plan(tmp: Path, plan: str, *extra: str) -> tuple[int, str]:
    o = run_cli(["fix", "--plan", plan, *extra], tmp, root=True)
    assert_clean_failure(o)
    return o.code, o.err


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda p: p.write_bytes(os.urandom(4096) + b"\xff\xfe"), "not UTF-8"),
        (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "nests deeper"),
        (lambda p: p.symlink_to("/dev/zero"), "not a regular file"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: p.write_text('{"fixes": [' + "1," * 600_000 + "1]}"), "too large"),
        (lambda p: p.write_text("{NaN}"), "not JSON"),
        (lambda p: None, "cannot read"),
    ],
    ids=["random-bytes", "nested-100k", "dev-zero", "directory", "huge", "nan", "missing"],
)
def test_bad_plan_files(make: object, needle: str, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    make(plan)  # type: ignore[operator]
    code, err = _fix_plan(tmp_path, str(plan), "--yes")
    assert code in (64, 65) and needle in err
    assert not (tmp_path / "sysctl.d").exists() and not (tmp_path / "state").exists()


def test_sysctl_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "sysctl.d").write_text("not a directory\n")
    fake_tree(tmp_path / "proc_sys")
    before = tree_digest(tmp_path / "proc_sys") | tree_digest(tmp_path / "sysctl.d")
    code, err = _fix_plan(tmp_path, str(_plan(tmp_path / "p.json", WS_FIX)), "--yes")
    assert code in (1, 65) and "sysctl.d" in err
    assert before == tree_digest(tmp_path / "proc_sys") | tree_digest(tmp_path / "sysctl.d")


def test_conf_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "sysctl.d" / FILE_NAME).mkdir(parents=True)
    fake_tree(tmp_path / "proc_sys")
    before = tree_digest(tmp_path / "proc_sys")
    code, err = _fix_plan(tmp_path, str(_plan(tmp_path / "p.json", WS_FIX)), "--yes")
    assert code == 65 and "directory" in err
    assert before == tree_digest(tmp_path / "proc_sys")


def test_state_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("x")
    fake_tree(tmp_path / "proc_sys")
    before = tree_digest(tmp_path / "proc_sys")
    code, err = _fix_plan(tmp_path, str(_plan(tmp_path / "p.json", WS_FIX)), "--yes")
    assert code in (1, 65) and ("nothing was changed" in err or "backup" in err)
    assert before == tree_digest(tmp_path / "proc_sys")
    assert not (tmp_path / "sysctl.d" / FILE_NAME).exists()


def test_comments_of_an_existing_conf_are_kept(tmp_path: Path) -> None:
    conf = tmp_path / "sysctl.d" / FILE_NAME
    conf.parent.mkdir()
    conf.write_text("# keep me\nnet.ipv4.tcp_window_scaling = 0\n; and me\nnet.foo.bar = 3\n")
    o = run_cli(["fix", "--plan", str(_plan(tmp_path / "p.json", WS_FIX)), "--yes"], tmp_path, True)
    assert o.code == 0, o.err
    assert conf.read_text() == (
        "# keep me\nnet.ipv4.tcp_window_scaling = 1\n; and me\nnet.foo.bar = 3\n"
    )


def _backup(tmp: Path, **override: object) -> Path:
    data: dict[str, object] = {
        "created": 1.0,
        "sysctl_root": str(tmp / "proc_sys"),
        "conf_path": str(tmp / "sysctl.d" / FILE_NAME),
        "conf_old": None,
        "sysctls": {"net.ipv4.tcp_window_scaling": "0"},
        "routes": {},
    }
    data.update(override)
    path = tmp / "state" / BACKUP_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "override",
    [
        {"sysctls": {"kernel.core_pattern": "|/tmp/evil"}},
        {"sysctls": {"net.ipv4.ip_forward": "1"}},
        {"conf_path": "/etc/passwd"},
        {"sysctl_root": "/tmp"},
        {"sysctls": {"net.ipv4.tcp_rmem": 5}},
        {"sysctls": []},
        {"created": "yesterday"},
        {"routes": {"-4 10.0.0.0/8": "1.2.3.0/24 via 10.0.0.1"}},
        {"routes": {"-4 bad": None}},
        {"extra": 1},
    ],
)
def test_crafted_backup_is_refused_on_rollback_and_apply(
    override: dict[str, object], tmp_path: Path
) -> None:
    fake_tree(tmp_path / "proc_sys")
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    if override.get("conf_path") == "/etc/passwd":
        override = {"conf_path": str(victim)}
    backup = _backup(tmp_path, **override)
    before = tree_digest(tmp_path)
    o = run_cli(["fix", "--rollback"], tmp_path, root=True, sysctl_root=str(tmp_path / "proc_sys"))
    assert_clean_failure(o, 65)
    assert "left untouched" in o.err
    code, _ = _fix_plan(tmp_path, str(_plan(tmp_path / "p.json", WS_FIX)), "--yes")
    assert code == 65
    (tmp_path / "p.json").unlink()
    assert tree_digest(tmp_path) == {k: v for k, v in before.items() if Path(k).name != "p.json"}
    assert victim.read_text() == "precious\n" and backup.exists()


@FUZZ
@given(data=st.binary(max_size=2048))
def test_generated_bytes_as_plan_backup_conf_targets_secret(data: bytes, tmp_path: Path) -> None:
    blob = tmp_path / "blob"
    blob.write_bytes(data)
    fake_tree(tmp_path / "proc_sys")
    o = run_cli(["fix", "--plan", str(blob), "--yes"], tmp_path, root=True)
    assert o.code in DOCUMENTED and "internal error" not in o.err, o.err
    # Targets and secret through their loaders: a valid list would start a server, a valid
    # secret a probe; what matters is that nothing but a one-line TcpWizardError escapes.
    for load in (load_targets, read_secret_file):
        try:
            load(str(blob))
        except TcpWizardError as exc:
            assert int(exc.exit_code) in DOCUMENTED and "\n" not in str(exc)
    # The same bytes as the backup and as our conf: refused or used, never a crash.
    (tmp_path / "state").mkdir(exist_ok=True)
    (tmp_path / "state" / BACKUP_NAME).write_bytes(data)
    o = run_cli(["fix", "--rollback"], tmp_path, root=True, sysctl_root=str(tmp_path / "proc_sys"))
    assert o.code in (0, 1, 65) and "internal error" not in o.err, o.err
    (tmp_path / "state" / BACKUP_NAME).unlink(missing_ok=True)
    conf = tmp_path / "sysctl.d" / FILE_NAME
    conf.parent.mkdir(exist_ok=True)
    if conf.is_file():
        conf.write_bytes(data)
    o = run_cli(["fix", "--plan", str(_plan(tmp_path / "p.json", WS_FIX))], tmp_path, root=True)
    assert o.code in (0, 1, 65) and "internal error" not in o.err, o.err


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "empty"),
        (b"\x00" * 5000, "too large"),
    ],
)
def test_secret_files(content: bytes, needle: str, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(content)
    o = run_cli(["probe", "127.0.0.1", "--secret-file", str(secret)], tmp_path)
    assert_clean_failure(o, 64, 65)
    assert needle in o.err


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("http://example.org\n", "URL"),
        ("[::1\n", "unbalanced"),
        ("::1:99999\n", "IPv6"),
        ("host:0\n", "1 to 65535"),
    ],
)
def test_targets_files(text: str, needle: str, tmp_path: Path) -> None:
    targets = tmp_path / "targets"
    targets.write_text(text)
    o = run_cli(["exporter", "--targets", str(targets)], tmp_path)
    assert_clean_failure(o, 64)
    assert needle in o.err


# -- history ---------------------------------------------------------------------------------


def _foreign_sqlite(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (x TEXT)")
        db.execute("INSERT INTO notes VALUES ('mine')")
    db.close()


def _truncated_history(path: Path) -> None:
    from tcpwizard.history import History

    for i in range(20):  # several pages, so the cut loses real data
        History(path).append("h", {"exit_code": 0, "pad": "x" * 2000, "i": i})
    path.write_bytes(path.read_bytes()[:4096])


@pytest.mark.parametrize(
    "make",
    [
        _foreign_sqlite,
        lambda p: p.write_text("just text\n"),
        lambda p: p.write_bytes(b"SQLite format 3\x00" + b"\x00" * 20),
        _truncated_history,
        lambda p: p.mkdir(),
    ],
    ids=["other-sqlite", "text", "short-header", "truncated", "directory"],
)
@pytest.mark.parametrize("argv", [["history"], ["history", "h"], ["history", "h", "--json"]])
def test_history_refuses_what_is_not_ours_and_leaves_it(
    make: object, argv: list[str], tmp_path: Path
) -> None:
    db = tmp_path / "x.db"
    make(db)  # type: ignore[operator]
    before = tree_digest(db)
    o = run_cli([*argv, "--db", str(db)], tmp_path)
    assert_clean_failure(o, 65)
    if "--json" in argv:
        assert o.json()["error"] and o.json()["exit_code"] == 65
    assert tree_digest(db) == before
    assert {p.name for p in tmp_path.iterdir()} == {"x.db", "proc_sys"}  # no -wal, no -shm


def test_history_writer_refuses_foreign_file_unchanged(tmp_path: Path) -> None:
    from tcpwizard.history import History, HistoryError

    db = tmp_path / "x.db"
    _foreign_sqlite(db)
    before = db.read_bytes()
    with pytest.raises(HistoryError):
        History(db).append("h", {"exit_code": 0})
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]  # no -wal, no -journal


def test_history_reading_creates_nothing(tmp_path: Path) -> None:
    o = run_cli(["history", "--db", str(tmp_path / "some/typo/path.db")], tmp_path)
    assert_clean_failure(o, 3)
    assert not (tmp_path / "some").exists()


def test_history_writer_needs_existing_directory_for_explicit_path(tmp_path: Path) -> None:
    from tcpwizard.history import History, HistoryError

    with pytest.raises(HistoryError, match="does not exist"):
        History(tmp_path / "typo" / "h.db").append("h", {})
    assert not (tmp_path / "typo").exists()
    History(tmp_path / "h.db").append("h", {"exit_code": 1})
    rows, bad = History(tmp_path / "h.db").rows("h")
    assert [r.exit_code for r in rows] == [1] and not bad


@FUZZ
@given(data=st.binary(min_size=0, max_size=4096))
def test_generated_bytes_as_history(data: bytes, tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    db.write_bytes(data)
    o = run_cli(["history", "h", "--db", str(db), "--json"], tmp_path)
    assert o.code in (3, 65), o.err
    assert db.read_bytes() == data
