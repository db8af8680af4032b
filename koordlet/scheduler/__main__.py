"""``python -m koordlet.scheduler`` = ``koord-scheduler-extender``."""

from koordlet.scheduler.cli import entry

entry()
