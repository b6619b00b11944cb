"""deploy/prometheus/: the alert rules are valid, each has a promtool unit test that fires it, and the
example configuration loads them."""

from __future__ import annotations

import yaml

from tests.promtool import RULES_DIR, promtool


def test_the_alert_rules_are_valid():
    result = promtool("check", "rules", "optima-alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_alert_rules_unit_tests_pass():
    result = promtool("test", "rules", "optima-alerts.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_unit_test_in_which_it_fires():
    rules = yaml.safe_load((RULES_DIR / "optima-alerts.yml").read_text())
    alerts = {r["alert"] for group in rules["groups"] for r in group["rules"] if "alert" in r}
    assert len(alerts) >= 10
    tests = yaml.safe_load((RULES_DIR / "optima-alerts.test.yml").read_text())
    fired = {
        case["alertname"]
        for test in tests["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert alerts - fired == set(), f"alerts without a unit test that fires them: {sorted(alerts - fired)}"


def test_the_example_prometheus_configuration_loads_the_rules():
    result = promtool("check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 1 rule files found" in result.stdout
