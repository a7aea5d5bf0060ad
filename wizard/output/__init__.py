"""Renderers: text (rich), json (versioned), prometheus, nagios."""
