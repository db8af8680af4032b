"""DefaultPreemption: kube-scheduler's preemption as a PostFilter plugin (:mod:`.plugin`), its args
(:mod:`.args`), the victims on one node (:mod:`.victims`) and the choice of the node (:mod:`.candidates`)."""

from koord.scheduler.plugins.defaultpreemption.plugin import NAME, DefaultPreemption

__all__ = ["NAME", "DefaultPreemption"]
