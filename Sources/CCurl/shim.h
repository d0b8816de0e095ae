// Thin, typed wrappers around libcurl's variadic API, which Swift cannot call directly.
// One wrapper per argument kind; magic values behind accessors. Nothing here holds state.
#ifndef HOOKPROXY_CCURL_SHIM_H
#define HOOKPROXY_CCURL_SHIM_H

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

// MARK: easy options, one per argument kind

static inline CURLcode hp_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode hp_setopt_off(CURL *easy, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode hp_setopt_str(CURL *easy, CURLoption option, const char *value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode hp_setopt_ptr(CURL *easy, CURLoption option, void *value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode hp_setopt_slist(CURL *easy, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(easy, option, value);
}

// Callbacks: one wrapper per callback signature.
typedef size_t (*hp_data_callback)(char *buffer, size_t size, size_t count, void *context);
typedef int (*hp_xferinfo_callback)(void *context, curl_off_t dltotal, curl_off_t dlnow,
                                    curl_off_t ultotal, curl_off_t ulnow);
typedef int (*hp_seek_callback)(void *context, curl_off_t offset, int origin);
typedef CURLcode (*hp_ssl_ctx_callback)(CURL *easy, void *ssl_ctx, void *context);

static inline CURLcode hp_setopt_data_callback(CURL *easy, CURLoption option, hp_data_callback cb) {
    return curl_easy_setopt(easy, option, cb);
}
static inline CURLcode hp_setopt_xferinfo_callback(CURL *easy, hp_xferinfo_callback cb) {
    return curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, cb);
}
static inline CURLcode hp_setopt_seek_callback(CURL *easy, hp_seek_callback cb) {
    return curl_easy_setopt(easy, CURLOPT_SEEKFUNCTION, cb);
}
typedef int (*hp_trailer_callback)(struct curl_slist **list, void *context);
static inline CURLcode hp_setopt_trailer_callback(CURL *easy, hp_trailer_callback cb) {
    return curl_easy_setopt(easy, CURLOPT_TRAILERFUNCTION, cb);
}
static inline int hp_trailerfunc_ok(void) { return CURL_TRAILERFUNC_OK; }
typedef int (*hp_closesocket_callback)(void *context, curl_socket_t socket);
static inline CURLcode hp_setopt_closesocket_callback(CURL *easy, hp_closesocket_callback cb) {
    return curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, cb);
}
typedef int (*hp_prereq_callback)(void *context, char *primary_ip, char *local_ip, int primary_port, int local_port);
static inline CURLcode hp_setopt_prereq_callback(CURL *easy, hp_prereq_callback cb) {
    return curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, cb);
}
static inline int hp_prereqfunc_ok(void) { return CURL_PREREQFUNC_OK; }
static inline CURLcode hp_setopt_ssl_ctx_callback(CURL *easy, hp_ssl_ctx_callback cb) {
    return curl_easy_setopt(easy, CURLOPT_SSL_CTX_FUNCTION, cb);
}

// MARK: easy info, one per result kind

static inline CURLcode hp_getinfo_long(CURL *easy, CURLINFO info, long *out) {
    return curl_easy_getinfo(easy, info, out);
}
static inline CURLcode hp_getinfo_off(CURL *easy, CURLINFO info, curl_off_t *out) {
    return curl_easy_getinfo(easy, info, out);
}
static inline CURLcode hp_getinfo_str(CURL *easy, CURLINFO info, char **out) {
    return curl_easy_getinfo(easy, info, out);
}
static inline CURLcode hp_getinfo_socket(CURL *easy, CURLINFO info, curl_socket_t *out) {
    return curl_easy_getinfo(easy, info, out);
}
static inline CURLcode hp_getinfo_ptr(CURL *easy, CURLINFO info, void **out) {
    return curl_easy_getinfo(easy, info, out);
}

/// The OpenSSL `SSL *` of the transfer's connection (CURLINFO_TLS_SSL_PTR), NULL without one.
static inline void *hp_tls_ssl_pointer(CURL *easy) {
    struct curl_tlssessioninfo *info = NULL;
    if(curl_easy_getinfo(easy, CURLINFO_TLS_SSL_PTR, &info) != CURLE_OK || !info || info->backend != CURLSSLBACKEND_OPENSSL)
        return NULL;
    return info->internals;
}

// MARK: multi options

static inline CURLMcode hp_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}
static inline CURLMcode hp_multi_setopt_ptr(CURLM *multi, CURLMoption option, void *value) {
    return curl_multi_setopt(multi, option, value);
}

// The socket API: curl says which sockets to watch and when to time out; the caller reports readiness.
typedef int (*hp_socket_callback)(CURL *easy, curl_socket_t socket, int what, void *context, void *socket_context);
typedef int (*hp_timer_callback)(CURLM *multi, long timeout_ms, void *context);

static inline CURLMcode hp_multi_setopt_socket_callback(CURLM *multi, hp_socket_callback cb) {
    return curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, cb);
}
static inline CURLMcode hp_multi_setopt_timer_callback(CURLM *multi, hp_timer_callback cb) {
    return curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, cb);
}

// MARK: magic values

static inline size_t hp_writefunc_pause(void) { return CURL_WRITEFUNC_PAUSE; }
static inline size_t hp_readfunc_pause(void) { return CURL_READFUNC_PAUSE; }
static inline size_t hp_readfunc_abort(void) { return CURL_READFUNC_ABORT; }
static inline int hp_seekfunc_ok(void) { return CURL_SEEKFUNC_OK; }
static inline int hp_seekfunc_cantseek(void) { return CURL_SEEKFUNC_CANTSEEK; }
static inline int hp_pause_cont(void) { return CURLPAUSE_CONT; }
static inline int hp_pause_all(void) { return CURLPAUSE_ALL; }
static inline int hp_pause_recv(void) { return CURLPAUSE_RECV; }
static inline int hp_pause_send(void) { return CURLPAUSE_SEND; }
static inline curl_socket_t hp_socket_timeout(void) { return CURL_SOCKET_TIMEOUT; }
static inline int hp_poll_in(void) { return CURL_POLL_IN; }
static inline int hp_poll_out(void) { return CURL_POLL_OUT; }
static inline int hp_poll_remove(void) { return CURL_POLL_REMOVE; }
static inline int hp_cselect_in(void) { return CURL_CSELECT_IN; }
static inline int hp_cselect_out(void) { return CURL_CSELECT_OUT; }
static inline int hp_cselect_err(void) { return CURL_CSELECT_ERR; }
static inline size_t hp_error_size(void) { return CURL_ERROR_SIZE; }
static inline long hp_global_default(void) { return CURL_GLOBAL_DEFAULT; }
static inline long hp_http_version_1_1(void) { return CURL_HTTP_VERSION_1_1; }
static inline long hp_http_version_1_0(void) { return CURL_HTTP_VERSION_1_0; }
static inline long hp_http_version_2tls(void) { return CURL_HTTP_VERSION_2TLS; }
static inline long hp_pipe_multiplex(void) { return CURLPIPE_MULTIPLEX; }
static inline long hp_auth_basic(void) { return (long)CURLAUTH_BASIC; }
static inline long hp_auth_digest(void) { return (long)CURLAUTH_DIGEST; }
static inline long hp_auth_ntlm(void) { return (long)CURLAUTH_NTLM; }
static inline long hp_auth_negotiate(void) { return (long)CURLAUTH_NEGOTIATE; }
static inline long hp_auth_any(void) { return (long)CURLAUTH_ANY; }
static inline long hp_auth_anysafe(void) { return (long)CURLAUTH_ANYSAFE; }
static inline long hp_auth_only(void) { return (long)CURLAUTH_ONLY; }
static inline long hp_proto_http_https(void) { return (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS); }

#endif
