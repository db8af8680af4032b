"""Resource executor: every cgroup, resctrl and sysfs write (validated, cached, leveled, audited)."""
