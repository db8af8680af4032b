"""``python -m koordlet.manager`` = ``koord-manager``."""

from koordlet.manager.cli import entry

entry()
