// A fast WebSocket echo server and round-trip client for bench/ws.sh, so that the peers are not what is measured
// (Python's websockets tops out near 6,000 round trips/s per process). Minimal on purpose: binary messages in one
// frame each, the client's fixed RFC 6455 sample key (a proxy forwards the client's key, so the server answers
// that key's accept value), blocking sockets, a thread per connection or session.
//
//   ws_peer server PORT
//   ws_peer client HOST PORT PATH SESSIONS SECONDS SIZE   → prints round trips per second (all sessions)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *KEY = "dGhlIHNhbXBsZSBub25jZQ==";
static const char *ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";  // RFC 6455 §1.3

static int read_full(int fd, uint8_t *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const uint8_t *buf, size_t n) {
    size_t sent = 0;
    while (sent < n) {
        ssize_t r = send(fd, buf + sent, n - sent, MSG_NOSIGNAL);
        if (r <= 0) return -1;
        sent += (size_t)r;
    }
    return 0;
}

// Reads an HTTP head (up to the blank line) into buf; returns its length or -1.
static int read_head(int fd, char *buf, size_t cap) {
    size_t n = 0;
    while (n + 1 < cap) {
        if (recv(fd, buf + n, 1, 0) != 1) return -1;
        n++;
        if (n >= 4 && memcmp(buf + n - 4, "\r\n\r\n", 4) == 0) { buf[n] = 0; return (int)n; }
    }
    return -1;
}

// One frame: returns its payload length (payload in buf, unmasked) or -1. Close frames end the connection.
static long read_frame(int fd, uint8_t *buf, size_t cap) {
    uint8_t h[2];
    if (read_full(fd, h, 2)) return -1;
    if ((h[0] & 0x0F) == 8) return -1;
    uint64_t len = h[1] & 0x7F;
    if (len == 126) { uint8_t e[2]; if (read_full(fd, e, 2)) return -1; len = ((uint64_t)e[0] << 8) | e[1]; }
    else if (len == 127) { uint8_t e[8]; if (read_full(fd, e, 8)) return -1; len = 0; for (int i = 0; i < 8; i++) len = (len << 8) | e[i]; }
    uint8_t mask[4] = {0};
    int masked = h[1] & 0x80;
    if (masked && read_full(fd, mask, 4)) return -1;
    if (len > cap || read_full(fd, buf, len)) return -1;
    if (masked) for (uint64_t i = 0; i < len; i++) buf[i] ^= mask[i & 3];
    return (long)len;
}

static size_t frame_head(uint8_t *out, size_t len, int masked) {
    size_t n = 0;
    out[n++] = 0x82;
    uint8_t m = masked ? 0x80 : 0;
    if (len < 126) out[n++] = m | (uint8_t)len;
    else if (len <= 0xFFFF) { out[n++] = m | 126; out[n++] = (uint8_t)(len >> 8); out[n++] = (uint8_t)len; }
    else { out[n++] = m | 127; for (int i = 7; i >= 0; i--) out[n++] = (uint8_t)(len >> (8 * i)); }
    if (masked) { out[n++] = 0x12; out[n++] = 0x34; out[n++] = 0x56; out[n++] = 0x78; }
    return n;
}

static void nodelay(int fd) { int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); }

static void *serve(void *arg) {
    int fd = (int)(intptr_t)arg;
    char head[8192];
    if (read_head(fd, head, sizeof head) > 0) {
        char answer[256];
        int n = snprintf(answer, sizeof answer, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                         "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", ACCEPT);
        if (write_full(fd, (uint8_t *)answer, (size_t)n) == 0) {
            static __thread uint8_t buf[1 << 20];
            uint8_t out[1 << 20];
            long len;
            while ((len = read_frame(fd, buf, sizeof buf)) >= 0) {
                size_t h = frame_head(out, (size_t)len, 0);
                memcpy(out + h, buf, (size_t)len);
                if (write_full(fd, out, h + (size_t)len)) break;
            }
        }
    }
    close(fd);
    return NULL;
}

static int server(int port) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 256)) { perror("ws_peer server"); return 1; }
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) continue;
        nodelay(fd);
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 4 << 20);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, serve, (void *)(intptr_t)fd)) close(fd);
    }
}

struct session { const char *host; int port; const char *path; double seconds; size_t size; long trips; int failed; };

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

static void *run_session(void *arg) {
    struct session *s = arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    inet_pton(AF_INET, s->host, &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) { s->failed = 1; close(fd); return NULL; }
    nodelay(fd);
    char req[512], head[8192];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", s->path, s->host, s->port, KEY);
    if (write_full(fd, (uint8_t *)req, (size_t)n) || read_head(fd, head, sizeof head) < 0 || !strstr(head, " 101 ")) {
        s->failed = 1; close(fd); return NULL;
    }
    uint8_t *out = malloc(s->size + 16), *in = malloc(s->size + 16);
    size_t h = frame_head(out, s->size, 1);
    for (size_t i = 0; i < s->size; i++) out[h + i] = (uint8_t)(i * 7) ^ (uint8_t)(0x12 + (i & 3));
    double end = now() + s->seconds;
    while (now() < end) {
        if (write_full(fd, out, h + s->size) || read_frame(fd, in, s->size + 16) != (long)s->size) { s->failed = 1; break; }
        s->trips++;
    }
    uint8_t bye[6] = {0x88, 0x80, 1, 2, 3, 4};
    write_full(fd, bye, sizeof bye);
    free(out); free(in);
    close(fd);
    return NULL;
}

static int client(const char *host, int port, const char *path, int sessions, double seconds, size_t size) {
    struct session *s = calloc((size_t)sessions, sizeof *s);
    pthread_t *t = calloc((size_t)sessions, sizeof *t);
    for (int i = 0; i < sessions; i++) {
        s[i] = (struct session){host, port, path, seconds, size, 0, 0};
        pthread_create(&t[i], NULL, run_session, &s[i]);
    }
    long trips = 0;
    int failed = 0;
    for (int i = 0; i < sessions; i++) { pthread_join(t[i], NULL); trips += s[i].trips; failed += s[i].failed; }
    if (failed) fprintf(stderr, "ws_peer: %d of %d sessions failed\n", failed, sessions);
    printf("%.0f\n", trips / seconds);
    return trips > 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "server")) return server(atoi(argv[2]));
    if (argc == 8 && !strcmp(argv[1], "client"))
        return client(argv[2], atoi(argv[3]), argv[4], atoi(argv[5]), atof(argv[6]), (size_t)atol(argv[7]));
    fprintf(stderr, "usage: ws_peer server PORT | ws_peer client HOST PORT PATH SESSIONS SECONDS SIZE\n");
    return 2;
}
