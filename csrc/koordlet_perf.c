/* koordlet perf helpers (see koordlet_perf.h): perf_event_open groups per CPU in cgroup mode. */
#define _GNU_SOURCE
#include "koordlet_perf.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int perf_open(uint32_t type, uint64_t config, int pid, int cpu, int group_fd, unsigned long flags,
                     int leader) {
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = type;
    attr.config = config;
    /* the leader starts disabled and members follow it, so the whole group counts the same interval */
    attr.disabled = leader ? 1 : 0;
    attr.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    long fd = syscall(SYS_perf_event_open, &attr, pid, cpu, group_fd, flags | PERF_FLAG_FD_CLOEXEC);
    return fd < 0 ? -errno : (int)fd;
}

int kn_perf_probe(uint32_t type, uint64_t config) {
    int fd = perf_open(type, config, 0, -1, -1, 0, 1);
    if (fd < 0) return fd;
    close(fd);
    return 0;
}

void kn_perf_close(int *fds, int n) {
    for (int i = 0; i < n; i++) {
        if (fds[i] >= 0) close(fds[i]);
        fds[i] = -1;
    }
}

int kn_perf_open(int cgroup_fd, const int *cpus, int ncpus, const uint32_t *types, const uint64_t *configs,
                 int nevents, int *fds, int *failed_index) {
    int n = ncpus * nevents;
    for (int i = 0; i < n; i++) fds[i] = -1;
    *failed_index = -1;
    if (ncpus <= 0 || nevents <= 0) return -EINVAL;
    for (int c = 0; c < ncpus; c++) {
        int leader = -1;
        for (int e = 0; e < nevents; e++) {
            int idx = c * nevents + e;
            /* cgroup mode: pid is the cgroup directory fd, and events are per CPU (cpu >= 0) */
            int fd = perf_open(types[e], configs[e], cgroup_fd, cpus[c], leader, PERF_FLAG_PID_CGROUP, e == 0);
            if (fd < 0) {
                *failed_index = idx;
                kn_perf_close(fds, n);
                return fd;
            }
            fds[idx] = fd;
            if (e == 0) leader = fd;
        }
    }
    return 0;
}

int kn_perf_enable(const int *fds, int ncpus, int nevents, int on) {
    for (int c = 0; c < ncpus; c++) {
        int leader = fds[c * nevents];
        if (on && ioctl(leader, PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP) < 0) return -errno;
        if (ioctl(leader, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP) < 0)
            return -errno;
    }
    return 0;
}

int kn_perf_read(const int *fds, int ncpus, int nevents, uint64_t *out) {
    size_t want = (size_t)(3 + nevents) * sizeof(uint64_t);
    for (int c = 0; c < ncpus; c++) {
        uint64_t *slot = out + (size_t)c * (size_t)(3 + nevents);
        ssize_t got = read(fds[c * nevents], slot, want);
        if (got < 0) return -errno;
        if ((size_t)got != want || slot[0] != (uint64_t)nevents) return -EIO;
    }
    return 0;
}
