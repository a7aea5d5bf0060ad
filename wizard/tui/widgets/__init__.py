"""Widgets of the TUI that Textual does not ship: a braille time plot, the wizard-gap bar,
transfer progress rows."""
