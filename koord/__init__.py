"""koord: the cluster side of the system and the runtime every process shares.

``runtime`` (threads and the stop Event, the HTTP endpoint, logging, errors, config files, flags, plugin
loading) sits below every process; ``kube`` (list+watch informers, leader election, work queue, Event
recorder, the cluster-process scaffolding and the shared Kubernetes vocabulary) and ``apis`` (Koordinator's
API types) above it. The processes: ``manager`` (koord-manager), ``scheduler`` (koord-scheduler and its
kube-scheduler extender front end) and ``descheduler`` (koord-descheduler). The node agent is the sibling
package ``koordlet``; see ``docs/architecture.md``.
"""

__version__ = "0.1.0"
