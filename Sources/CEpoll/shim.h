// Linux's epoll, eventfd and thread names, which Swift's Glibc module does not bring in, for the upstream engine's socket
// watcher. Constants behind accessors (glibc declares the EPOLL* flags as an enum, imported unevenly).
#ifndef HOOKPROXY_CEPOLL_SHIM_H
#define HOOKPROXY_CEPOLL_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>

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

/// Names the calling thread (as `top -H` and `perf` show it); at most 15 characters are kept.
static inline void hp_set_thread_name(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }

static inline uint32_t hp_epollin(void) { return EPOLLIN; }
static inline uint32_t hp_epollout(void) { return EPOLLOUT; }
static inline uint32_t hp_epollerr(void) { return EPOLLERR; }
static inline uint32_t hp_epollhup(void) { return EPOLLHUP; }
static inline uint32_t hp_epollrdhup(void) { return EPOLLRDHUP; }
static inline uint32_t hp_epolloneshot(void) { return EPOLLONESHOT; }

#endif
