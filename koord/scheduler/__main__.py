"""``python -m koord.scheduler`` = ``koord-scheduler``."""

from koord.scheduler.cli import entry

entry()
