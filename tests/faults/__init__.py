"""The fault matrix: each case of ``docs/reliability.md`` injected against the real agent process (the
real kernel for kernel faults, the test API server for API faults), checked against its promise."""
