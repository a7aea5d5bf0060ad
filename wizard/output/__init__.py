"""The renderers. Each format (text, json, prometheus, nagios) is a `Format` in its own
`format_<name>.py`, listed in `registry.py`; it renders each document kind it knows."""
