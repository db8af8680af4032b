"""``python -m koord.manager`` = ``koord-manager``."""

from koord.manager.cli import entry

entry()
