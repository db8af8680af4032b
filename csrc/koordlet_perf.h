/* koordlet perf helpers: per-CPU perf_event groups counting one cgroup (perf_event_open(2) with
 * PERF_FLAG_PID_CGROUP), for CPI (cycles, instructions) and software events where there is no PMU.
 * Thin syscall wrappers only: descriptors and results live in caller-provided arrays.
 * Return 0 on success, -errno on failure. This header is also the cffi cdef ('#' lines dropped). */
#include <stddef.h>
#include <stdint.h>

/* Open and close one counting event (type, config) on the calling thread: does this kernel/VM offer it?
 * 0, or -errno (-ENOENT / -EOPNOTSUPP: no such event here, e.g. no hardware PMU; -EACCES: paranoid). */
int kn_perf_probe(uint32_t type, uint64_t config);

/* For each of `ncpus` CPUs open a group of `nevents` events (types[i], configs[i]; the first leads,
 * disabled until kn_perf_enable) counting the tasks of the cgroup whose directory is open as
 * `cgroup_fd`. fds[cpu_index * nevents + event] gets each descriptor. On failure everything opened is
 * closed, every fds[] is -1, *failed_index is the failing cpu_index * nevents + event, and -errno. */
int kn_perf_open(int cgroup_fd, const int *cpus, int ncpus, const uint32_t *types, const uint64_t *configs,
                 int nevents, int *fds, int *failed_index);

/* Reset and enable (on != 0) or disable (on == 0) every group. 0 or the first -errno. */
int kn_perf_enable(const int *fds, int ncpus, int nevents, int on);

/* Read every group into out[cpu_index * (3 + nevents) ...] = nr, time_enabled, time_running,
 * value[0..nevents-1] (PERF_FORMAT_GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING). 0 or -errno. */
int kn_perf_read(const int *fds, int ncpus, int nevents, uint64_t *out);

/* Close every descriptor >= 0 and set it to -1. */
void kn_perf_close(int *fds, int n);
