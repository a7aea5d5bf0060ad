"""Modal screens: help, the apply confirmation with its dry-run diff, a file-name prompt."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Markdown, Static

from tcpwizard.advice.apply import Plan, render_diff

HELP = """\
# tcpwizard — keys

The same pipeline as `tcpwizard check HOST`: audit both hosts, measure the path, run test
transfers (incl. Dynamic Right-Sizing), name the one limiting factor and the fix.

| key | does |
|-----|------|
| `1` `2` `3` `4` | host · path · transfer · verdict screen |
| `5` | connections: every live TCP connection of this host, judged (`f`: busy only) |
| `n` | enter a host (`name`, `name:port`, `[v6]:port`); Enter runs the check |
| `esc` | cancel the running check (a running transfer ends first) |
| `r` | run the check again |
| `↑` `↓` / mouse | move in a list; the pane beside it explains the item |
| `tab` | next pane |
| `g` `b` `t` | transfer screen: goodput · buffer size · RTT plot |
| `s` | transfer screen: time-sequence graph (again: next transfer; needs `--capture`) |
| `c` | verdict screen: copy the highlighted fix to the clipboard |
| `s` | verdict screen: save all fixes as a shell script |
| `a` | verdict screen: apply this host's fixes (dry-run diff first; root only) |
| `e` | verdict screen: export the report as JSON |
| `ctrl+t` | light or dark colours |
| `?` | this help |
| `q` | quit |

The far end should run `tcpwizard serve`; without it the check is peerless (no transfer,
lower confidence). Fixes for the peer are applied on the peer. Started with `--hops`, the
path screen shows the hops: where the RTT jumps, where loss begins, ICMP rate limits, MTU.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "close", "Close", key_display="esc"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box", classes="dialog"):
            yield Markdown(HELP)

    def action_close(self) -> None:
        self.dismiss(None)


class ApplyScreen(ModalScreen[bool]):
    """Shows what would change (the dry run); applies only when confirmed, and only as root."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", key_display="esc"),
    ]

    def __init__(self, plan: Plan, is_root: bool) -> None:
        super().__init__()
        self.plan = plan
        self.is_root = is_root

    def compose(self) -> ComposeResult:
        plan = self.plan
        with Vertical(id="apply-box", classes="dialog"):
            yield Label("Apply this host's fixes — dry run", classes="dialog-title")
            with VerticalScroll(id="diff-scroll"):
                yield Static(render_diff(plan) or "(nothing to show)", id="diff", markup=False)
            if not plan.has_changes:
                why = "Nothing to apply: every value is already set (manual steps are listed)."
            elif not self.is_root:
                why = (
                    "Applying needs root. Run the TUI with sudo, or save the report (e) and run "
                    "`sudo tcpwizard fix --plan REPORT.json --yes`."
                )
            else:
                why = (
                    f"Writes the live sysctls and {plan.conf_path}; "
                    "`sudo tcpwizard fix --rollback` undoes it."
                )
            yield Static(why, id="apply-why", markup=False)
            with Horizontal(classes="buttons"):
                yield Button(
                    "Apply",
                    id="apply",
                    variant="error",
                    disabled=not (self.is_root and plan.has_changes),
                )
                yield Button("Close", id="close", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#close", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "apply")

    def action_close(self) -> None:
        self.dismiss(False)


class PathPrompt(ModalScreen[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Cancel", key_display="esc"),
    ]

    def __init__(self, prompt: str, default: str) -> None:
        super().__init__()
        self.prompt = prompt
        self.default = default

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-box", classes="dialog"):
            yield Label(self.prompt, classes="dialog-title")
            yield Input(value=self.default, id="path-input")
            yield Static("Enter saves · esc cancels", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_close(self) -> None:
        self.dismiss(None)
