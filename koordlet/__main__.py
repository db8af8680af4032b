"""``python -m koordlet``: the same as the ``koordlet`` command."""

from koordlet.cli import main

main()
