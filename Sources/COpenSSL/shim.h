// Thin wrappers around OpenSSL macros and variadic or type-generic calls that Swift cannot see.
#ifndef HOOKPROXY_COPENSSL_SHIM_H
#define HOOKPROXY_COPENSSL_SHIM_H

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>
#include <openssl/pem.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/bio.h>

// Stacks of certificates are macros in OpenSSL 3; expose them as functions.
static inline int hp_sk_X509_num(const STACK_OF(X509) *stack) { return sk_X509_num(stack); }
static inline X509 *hp_sk_X509_value(const STACK_OF(X509) *stack, int index) { return sk_X509_value(stack, index); }
static inline STACK_OF(X509) *hp_sk_X509_new_null(void) { return sk_X509_new_null(); }
static inline int hp_sk_X509_push(STACK_OF(X509) *stack, X509 *cert) { return sk_X509_push(stack, cert); }
static inline void hp_sk_X509_free(STACK_OF(X509) *stack) { sk_X509_free(stack); }
static inline void hp_sk_X509_pop_free(STACK_OF(X509) *stack) { sk_X509_pop_free(stack, X509_free); }

// BIO helpers (BIO_get_mem_data is a macro).
static inline long hp_BIO_get_mem_data(BIO *bio, char **out) { return BIO_get_mem_data(bio, out); }

// Verify callback type used by SSL_CTX_set_verify.
typedef int (*hp_verify_callback)(int preverify_ok, X509_STORE_CTX *ctx);
static inline void hp_SSL_CTX_set_verify(SSL_CTX *ctx, int mode, hp_verify_callback cb) { SSL_CTX_set_verify(ctx, mode, cb); }
typedef int (*hp_cert_verify_callback)(X509_STORE_CTX *ctx, void *arg);
static inline void hp_SSL_CTX_set_cert_verify_callback(SSL_CTX *ctx, hp_cert_verify_callback cb, void *arg) {
    SSL_CTX_set_cert_verify_callback(ctx, cb, arg);
}
static inline int hp_ssl_verify_peer(void) { return SSL_VERIFY_PEER; }
static inline void hp_SSL_CTX_forbid_renegotiation(SSL_CTX *ctx) { SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION); }
// Info callbacks (CloseNotifyLedger): `where` says what happened, `ret` which alert (level << 8 | description).
typedef void (*hp_info_callback)(const SSL *ssl, int where, int ret);
static inline void hp_SSL_CTX_set_info_callback(SSL_CTX *ctx, hp_info_callback cb) { SSL_CTX_set_info_callback(ctx, cb); }
static inline int hp_ssl_cb_read_alert(void) { return SSL_CB_READ_ALERT; }
static inline int hp_ssl_ad_close_notify(void) { return SSL_AD_CLOSE_NOTIFY; }
static inline int hp_ssl_verify_none(void) { return SSL_VERIFY_NONE; }
static inline unsigned long hp_xn_flag_rfc2253(void) { return XN_FLAG_RFC2253; }
static inline unsigned long hp_x509_v_flag_partial_chain(void) { return X509_V_FLAG_PARTIAL_CHAIN; }
static inline int hp_x509_v_err_application_verification(void) { return X509_V_ERR_APPLICATION_VERIFICATION; }
static inline unsigned int hp_x509_check_flag_no_partial_wildcards(void) { return X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS; }

#endif
