"""Shared fixtures: real servers on free ports, started per test module and stopped after."""

pytest_plugins = ["fixtures_services", "fixtures_shop", "fixtures_cluster", "fixtures_cli"]
