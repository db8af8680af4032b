"""``koordlet top``: a live terminal view of a running agent, read from its ``/status`` document.

:mod:`~koordlet.top.client` fetches the document (address, bearer token, CA; errors that say where it
looked), :mod:`~koordlet.top.render` turns one document into plain text lines, :mod:`~koordlet.top.command`
is the click command (live redraw, ``--once``). ``koordlet demo`` draws its live view with the same
renderer.
"""
