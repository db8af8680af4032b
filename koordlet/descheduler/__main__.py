"""``python -m koordlet.descheduler`` = ``koord-descheduler``."""

from koordlet.descheduler.cli import entry

entry()
