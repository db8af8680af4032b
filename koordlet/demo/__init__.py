"""``koordlet demo``: the value of colocation on this machine in a minute (:mod:`~koordlet.demo.command`).

:mod:`~koordlet.demo.sandbox` makes the pods and runs the agent (with the plugin kit),
:mod:`~koordlet.demo.timeline` drives the spike and records, :mod:`~koordlet.demo.report` makes the plot
(:mod:`~koordlet.demo.chart`, :mod:`~koordlet.demo.png`, :mod:`~koordlet.demo.font`) and the summary.
"""
