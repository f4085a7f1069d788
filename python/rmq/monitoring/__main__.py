"""``python -m rmq.monitoring``: the paths of the shipped Grafana dashboard and Prometheus alert rules."""

from __future__ import annotations

from rmq.monitoring import files


def main() -> None:
    for path in files().values():
        print(path)


if __name__ == "__main__":
    main()
