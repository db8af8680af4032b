/* koordlet native helpers: thin syscall wrappers called through cffi (API mode).
 * No Python.h, no memory ownership crossing the boundary: callers pass buffers.
 * Return >= 0 on success, -errno on failure unless stated otherwise. */
int kn_abi_version(void);
