// Linux's epoll, eventfd, AIO poll and thread names, which Swift's Glibc module does not bring in, for the upstream
// engine's socket watching. Constants behind accessors (glibc declares the EPOLL* flags as an enum, imported unevenly).
#ifndef HOOKPROXY_CEPOLL_SHIM_H
#define HOOKPROXY_CEPOLL_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/aio_abi.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline int hp_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }
static inline int hp_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

static inline int hp_epoll_add(int epoll, int fd, uint32_t events, uint64_t data) {
    struct epoll_event event = { .events = events, .data = { .u64 = data } };
    return epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event);
}
static inline int hp_epoll_modify(int epoll, int fd, uint32_t events, uint64_t data) {
    struct epoll_event event = { .events = events, .data = { .u64 = data } };
    return epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &event);
}
static inline int hp_epoll_delete(int epoll, int fd) { return epoll_ctl(epoll, EPOLL_CTL_DEL, fd, NULL); }

/// Waits like epoll_wait, into parallel arrays (struct epoll_event is packed on x86-64).
static inline int hp_epoll_wait(int epoll, uint32_t *events, uint64_t *data, int capacity, int timeout_ms) {
    struct epoll_event ready[256];
    if (capacity > 256) capacity = 256;
    int count = epoll_wait(epoll, ready, capacity, timeout_ms);
    for (int i = 0; i < count; i++) {
        events[i] = ready[i].events;
        data[i] = ready[i].data.u64;
    }
    return count;
}

/// A Linux AIO context able to hold `slots` requests (io_setup); 0 when the kernel refuses (no CONFIG_AIO, a seccomp
/// filter, or the system's aio-max-nr reached).
static inline uint64_t hp_aio_open(unsigned slots) {
    aio_context_t context = 0;
    return syscall(SYS_io_setup, slots, &context) == 0 ? (uint64_t)context : 0;
}
static inline void hp_aio_close(uint64_t context) { syscall(SYS_io_destroy, (aio_context_t)context); }

/// Asks the kernel, once, to signal `eventfd` when `fd` is readable (IOCB_CMD_POLL with IOCB_FLAG_RESFD). The kernel
/// completes it at once when `fd` is readable already. `request` must stay valid until it completes or the context
/// closes. 0 on success, else the errno.
static inline int hp_aio_poll_readable(uint64_t context, struct iocb *request, int fd, int eventfd) {
    memset(request, 0, sizeof *request);
    request->aio_lio_opcode = IOCB_CMD_POLL;
    request->aio_fildes = (uint32_t)fd;
    request->aio_buf = POLLIN;
    request->aio_flags = IOCB_FLAG_RESFD;
    request->aio_resfd = (uint32_t)eventfd;
    struct iocb *requests[1] = { request };
    return syscall(SYS_io_submit, (aio_context_t)context, 1, requests) == 1 ? 0 : errno;
}

/// Takes the completed requests off the context's ring without waiting; how many there were (or -1).
static inline int hp_aio_reap(uint64_t context) {
    struct io_event done[8];
    struct timespec now = { 0, 0 };
    return (int)syscall(SYS_io_getevents, (aio_context_t)context, 0, 8, done, &now);
}

/// Allocates an AIO request block (zeroed), for `hp_aio_poll_readable`.
static inline struct iocb *hp_aio_request(void) { return (struct iocb *)calloc(1, sizeof(struct iocb)); }

/// Names the calling thread (as `top -H` and `perf` show it); at most 15 characters are kept.
static inline void hp_set_thread_name(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }

static inline uint32_t hp_epollin(void) { return EPOLLIN; }
static inline uint32_t hp_epollout(void) { return EPOLLOUT; }
static inline uint32_t hp_epollerr(void) { return EPOLLERR; }
static inline uint32_t hp_epollhup(void) { return EPOLLHUP; }
static inline uint32_t hp_epollrdhup(void) { return EPOLLRDHUP; }
static inline uint32_t hp_epolloneshot(void) { return EPOLLONESHOT; }

#endif
