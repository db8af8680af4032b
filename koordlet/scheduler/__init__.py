"""Compatibility package: koord-scheduler moved to :mod:`koord.scheduler`.

Only the plugin framework's public import path, ``koordlet.scheduler.framework``, is kept here, for plugins
written before the move; new code imports :mod:`koord.scheduler.framework`.
"""
