"""``python -m koord.scheduler`` = ``koord-scheduler-extender``."""

from koord.scheduler.cli import entry

entry()
