"""``python -m koord.scheduler.extender`` = ``koord-scheduler-extender``."""

from koord.scheduler.extender.cli import entry

entry()
