"""``python -m koord.descheduler`` = ``koord-descheduler``."""

from koord.descheduler.cli import entry

entry()
