"""Compatibility package: koord-descheduler moved to :mod:`koord.descheduler`.

Only the plugin framework's public import path, ``koordlet.descheduler.framework``, is kept here, for plugins
written before the move; new code imports :mod:`koord.descheduler.framework`.
"""
