"""Shared pytest configuration."""

pytest_plugins = ["tests.lab_fixtures", "tests.majority", "pytester"]
