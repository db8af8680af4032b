"""The colocation loop, end to end on one machine (``make loop`` / ``python -m tests.loop``): the test API
server, koord-manager, koord-scheduler, koord-descheduler and one koordlet per simulated node as
processes, and a process kubelet per node; one node driven hot, the cluster side reacting.
:mod:`.components` starts and stops the processes, :mod:`.scenario` drives and checks the story,
``__main__`` is the command.
"""
