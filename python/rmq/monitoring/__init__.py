"""Monitoring files shipped in the package: a Grafana dashboard and Prometheus alert rules over the metrics
the broker and the name server serve (``metricsExporterType=PROM``; README "Grafana and alerts").

``python -m rmq.monitoring`` prints their paths, one a line; :func:`files` gives them to programs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["ALERT_RULES", "GRAFANA_DASHBOARD", "files"]

GRAFANA_DASHBOARD: Final = "grafana-dashboard.json"
"""The Grafana dashboard (import it; it asks for a Prometheus data source)."""
ALERT_RULES: Final = "prometheus-alerts.yml"
"""The Prometheus alerting rules (a ``rule_files`` entry)."""


def files() -> dict[str, Path]:
    """The shipped files by name (:data:`GRAFANA_DASHBOARD`, :data:`ALERT_RULES`): their paths on disk."""
    here = Path(__file__).parent
    return {name: here / name for name in (GRAFANA_DASHBOARD, ALERT_RULES)}
