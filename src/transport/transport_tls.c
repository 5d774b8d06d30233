/*
 * transport_tls.c: the TLS transport (transport.h) and the per-listener contexts it runs on
 * (transport_tls.h), with OpenSSL.
 *
 * A connection's handshake is a non-blocking SSL_do_handshake run from recv, inside the one
 * event loop: when OpenSSL wants to write before it can read on (its flight of handshake
 * messages did not fit the socket), `blocked` says so and connection.c waits for the socket
 * to be writable instead. After the handshake recv is SSL_read, as many records as fit the
 * caller's buffer, and send is SSL_write: small output segments are gathered into one record
 * (broker->send_buffer) rather than sent as a record each. A handshake that fails logs
 * OpenSSL's errors as Mosquitto does ("OpenSSL Error[0]: ...") plus the client's address
 * and why its certificate was refused, and ends that connection only.
 *
 * The same transport runs the client side of peer links and bridges
 * (transport_tls_attach_client, on a client context built from the peer_* or a bridge's
 * bridge_* directives): the handshake starts with a writable socket, the dialled broker's
 * certificate must chain to the context's CAs and name the host dialled, and `ready` tells
 * connection.c when the role may start. A bridge's context may instead offer a pre-shared key,
 * offer an ALPN protocol, and require a good stapled OCSP response (checked in
 * ocsp_status_callback, during the handshake). certified_by lets the accepting side tell a
 * peer's certificate (peer CA) from a client's of another CA.
 *
 * This file must not know MQTT: it reads the listener's settings, the peer_* and bridge_* TLS
 * settings and the psk_file table of the listener's security settings, nothing else of the
 * broker.
 */
#include "transport_tls.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ocsp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "broker.h"
#include "config.h"
#include "log.h"
#include "psk_file.h"
#include "transport.h"

struct tls_context {
    SSL_CTX *ssl_ctx;
    atomic_int refs; /* connections on any event loop hold it */
    /* A client context's pre-shared key (bridge_identity, bridge_psk), offered in every
     * handshake (psk_client_callback). */
    char *psk_identity;
    uint8_t *psk;
    size_t psk_len;
};

struct tls_connection {
    SSL *ssl;
    bool handshake_done;
    bool failed;       /* a fatal error: no close_notify */
    unsigned blocked;  /* TRANSPORT_RECV_NEEDS_WRITE, TRANSPORT_SEND_NEEDS_READ */
    /* The end of the stream (0) or an error (-1, with deferred_errno) met after recv had
     * already read some bytes: those are returned first, this on the next call. */
    bool has_deferred;
    int deferred_result;
    int deferred_errno;
    char *psk_identity; /* the identity the client's pre-shared key was found for */
    bool client;        /* this end dialled (transport_tls_attach_client) */
    const char *ocsp_refusal; /* why the stapled OCSP response was refused (a client's) */
    struct tls_context *context; /* a client's, held while the connection lives */
};

/* ---- contexts ---- */

/* OpenSSL's reason for the oldest error queued (usually the cause: "No such file or
 * directory" before "system lib"), then the queue is emptied. */
static void take_openssl_reason(char *out, size_t size)
{
    unsigned long e = ERR_peek_error();
    const char *reason = e ? ERR_reason_error_string(e) : NULL;
    if (reason)
        snprintf(out, size, "%s", reason);
    else if (e)
        ERR_error_string_n(e, out, size);
    else
        snprintf(out, size, "unknown error");
    ERR_clear_error();
}

static int build_error(char *err, size_t errlen, const struct arbor_place *at,
                       const char *directive, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* "file:line: directive: <fmt>: <OpenSSL's reason>", as config errors read. */
static int build_error(char *err, size_t errlen, const struct arbor_place *at,
                       const char *directive, const char *fmt, ...)
{
    char reason[256];
    take_openssl_reason(reason, sizeof reason);
    int n = snprintf(err, errlen, "%s:%d: %s: ", at->file ? at->file : "config", at->line,
                     directive);
    if (n < 0 || (size_t)n >= errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    size_t used = (size_t)n + (m > 0 ? (size_t)m : 0);
    if (m >= 0 && used < errlen) snprintf(err + used, errlen - used, ": %s", reason);
    return -1;
}

/* A daemon has no terminal to ask for a pass phrase: an encrypted key fails to load. */
static int no_passphrase(char *buf, int size, int rwflag, void *userdata)
{
    return 0;
}

static unsigned int psk_server_callback(SSL *ssl, const char *identity, unsigned char *psk,
                                        unsigned int max_psk_len);

/* A directive's name as the operator wrote it: the listener's ("certfile") or, with prefix
 * "peer_", the one of peer links ("peer_certfile"). */
static const char *directive_name(char *buf, size_t size, const char *prefix, const char *name)
{
    snprintf(buf, size, "%s%s", prefix, name);
    return buf;
}

/* The certificate chain, then the key, which must belong to it. The key is read here rather
 * than by SSL_CTX_use_PrivateKey_file, which would report a key of the wrong certificate as
 * one it cannot load. */
static int load_certificate(SSL_CTX *ctx, const struct arbor_tls_settings *tls, const char *prefix,
                            char *err, size_t errlen)
{
    char cert_name[32], key_name[32];
    directive_name(cert_name, sizeof cert_name, prefix, "certfile");
    directive_name(key_name, sizeof key_name, prefix, "keyfile");
    if (SSL_CTX_use_certificate_chain_file(ctx, tls->certfile.value) != 1)
        return build_error(err, errlen, &tls->certfile.at, cert_name,
                           "cannot load the certificate chain in \"%s\"", tls->certfile.value);
    BIO *bio = BIO_new_file(tls->keyfile.value, "r");
    EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
    BIO_free(bio);
    if (!key)
        return build_error(err, errlen, &tls->keyfile.at, key_name,
                           "cannot load the private key in \"%s\" (a PEM key without a pass "
                           "phrase)",
                           tls->keyfile.value);
    int rc = 0;
    if (X509_check_private_key(SSL_CTX_get0_certificate(ctx), key) != 1)
        rc = build_error(err, errlen, &tls->keyfile.at, key_name,
                         "the private key in \"%s\" does not belong to the certificate in "
                         "\"%s\"",
                         tls->keyfile.value, tls->certfile.value);
    else if (SSL_CTX_use_PrivateKey(ctx, key) != 1)
        rc = build_error(err, errlen, &tls->keyfile.at, key_name,
                         "cannot use the private key in \"%s\"", tls->keyfile.value);
    EVP_PKEY_free(key);
    return rc;
}

/* The CA certificates client certificates are checked against; their names are also sent
 * to clients, so that one with several certificates picks a matching one. */
static int load_client_cas(SSL_CTX *ctx, const struct arbor_tls_settings *tls, char *err,
                           size_t errlen)
{
    if (tls->cafile.value) {
        if (SSL_CTX_load_verify_file(ctx, tls->cafile.value) != 1)
            return build_error(err, errlen, &tls->cafile.at, "cafile",
                               "cannot load CA certificates from \"%s\"", tls->cafile.value);
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(tls->cafile.value);
        if (names) SSL_CTX_set_client_CA_list(ctx, names);
        ERR_clear_error();
    }
    if (tls->capath.value && SSL_CTX_load_verify_dir(ctx, tls->capath.value) != 1)
        return build_error(err, errlen, &tls->capath.at, "capath",
                           "cannot use \"%s\" as a directory of CA certificates",
                           tls->capath.value);
    if (tls->require_certificate)
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    return 0;
}

/* Every CRL in the file; the client certificate (not the chain above it) is checked against
 * its issuer's CRL, which must be there, as Mosquitto does. */
static int load_crl(SSL_CTX *ctx, const struct arbor_tls_settings *tls, char *err, size_t errlen)
{
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    X509_LOOKUP *lookup = X509_STORE_add_lookup(store, X509_LOOKUP_file());
    if (!lookup || X509_load_crl_file(lookup, tls->crlfile.value, X509_FILETYPE_PEM) <= 0)
        return build_error(err, errlen, &tls->crlfile.at, "crlfile",
                           "cannot load a certificate revocation list from \"%s\"",
                           tls->crlfile.value);
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
    return 0;
}

static int load_dh_parameters(SSL_CTX *ctx, const struct arbor_tls_settings *tls, char *err,
                              size_t errlen)
{
    BIO *bio = BIO_new_file(tls->dhparamfile.value, "r");
    EVP_PKEY *params = bio ? PEM_read_bio_Parameters(bio, NULL) : NULL;
    BIO_free(bio);
    if (!params || !EVP_PKEY_is_a(params, "DH")) {
        EVP_PKEY_free(params);
        return build_error(err, errlen, &tls->dhparamfile.at, "dhparamfile",
                           "cannot load DH parameters from \"%s\"", tls->dhparamfile.value);
    }
    if (SSL_CTX_set0_tmp_dh_pkey(ctx, params) != 1) {
        EVP_PKEY_free(params);
        return build_error(err, errlen, &tls->dhparamfile.at, "dhparamfile",
                           "cannot use the DH parameters in \"%s\"", tls->dhparamfile.value);
    }
    return 0;
}

/* What listeners and peer links share: versions, options, modes, ciphers. */
static int set_protocol(SSL_CTX *ctx, const struct arbor_tls_settings *tls, const char *prefix,
                        char *err, size_t errlen)
{
    int version = tls->min_version == ARBOR_TLS_V1_3   ? TLS1_3_VERSION
                  : tls->min_version == ARBOR_TLS_V1_1 ? TLS1_1_VERSION
                                                       : TLS1_2_VERSION;
    SSL_CTX_set_min_proto_version(ctx, version);
    /* No compression (CRIME), no renegotiation (a client could make the broker redo the
     * expensive half of a handshake at will); a peer that closes the socket without a
     * close_notify has just closed the connection, as on plain TCP. */
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                 SSL_OP_IGNORE_UNEXPECTED_EOF);
    /* Partial writes, a retried write from another address (the output queue is gathered
     * into a shared buffer), and no buffers kept by idle connections. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
    char name[32];
    if (tls->ciphers.value && SSL_CTX_set_cipher_list(ctx, tls->ciphers.value) != 1)
        return build_error(err, errlen, &tls->ciphers.at,
                           directive_name(name, sizeof name, prefix, "ciphers"),
                           "no usable cipher in \"%s\"", tls->ciphers.value);
    if (tls->ciphers_tls13.value && SSL_CTX_set_ciphersuites(ctx, tls->ciphers_tls13.value) != 1)
        return build_error(err, errlen, &tls->ciphers_tls13.at,
                           directive_name(name, sizeof name, prefix, "ciphers_tls1.3"),
                           "no usable TLS 1.3 ciphersuite in \"%s\"", tls->ciphers_tls13.value);
    return 0;
}

/* A listener's own: the session id context and pre-shared keys. */
static int set_listener_protocol(SSL_CTX *ctx, const struct arbor_listener *listener, char *err,
                                 size_t errlen)
{
    const struct arbor_tls_settings *tls = &listener->tls;
    /* Resumed sessions must come back to the listener (and the client check) they began on. */
    char id[32];
    int id_len = snprintf(id, sizeof id, "arbor:%u", (unsigned)listener->port);
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)id, (unsigned)id_len);
    if (tls->psk_hint.value) {
        if (SSL_CTX_use_psk_identity_hint(ctx, tls->psk_hint.value) != 1)
            return build_error(err, errlen, &tls->psk_hint.at, "psk_hint", "cannot use the hint");
        SSL_CTX_set_psk_server_callback(ctx, psk_server_callback);
    }
    return 0;
}

/* OpenSSL fills a certificate's cache of its decoded extensions (key identifiers, flags) on
 * its first use, under the certificate's lock but read without it: with several loops, two
 * handshakes checking client certificates against the same CA at once raced there
 * (ThreadSanitizer, libcrypto 3.0; openssl/openssl#25202). Filled here, while one thread
 * builds the context, every handshake only reads it. (CAs found in a capath directory are
 * loaded at their first use, so theirs is still filled then.) */
static void fill_certificate_caches(SSL_CTX *ctx)
{
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    STACK_OF(X509_OBJECT) *objects = store ? X509_STORE_get0_objects(store) : NULL;
    for (int i = 0; objects && i < sk_X509_OBJECT_num(objects); i++) {
        X509 *ca = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objects, i));
        if (ca) X509_check_purpose(ca, -1, 0);
    }
    X509 *own = SSL_CTX_get0_certificate(ctx);
    if (own) X509_check_purpose(own, -1, 0);
}

int tls_ssl_ctx_configure(struct ssl_ctx_st *ctx, const struct arbor_listener *listener, char *err,
                          size_t errlen)
{
    const struct arbor_tls_settings *tls = &listener->tls;
    ERR_clear_error();
    int rc = set_protocol(ctx, tls, "", err, errlen);
    if (rc == 0) rc = set_listener_protocol(ctx, listener, err, errlen);
    if (rc == 0 && tls->certfile.value) rc = load_certificate(ctx, tls, "", err, errlen);
    if (rc == 0) rc = load_client_cas(ctx, tls, err, errlen);
    if (rc == 0 && tls->crlfile.value) rc = load_crl(ctx, tls, err, errlen);
    if (rc == 0 && tls->dhparamfile.value) rc = load_dh_parameters(ctx, tls, err, errlen);
    if (rc == 0 && !tls->dhparamfile.value) SSL_CTX_set_dh_auto(ctx, 1);
    if (rc == 0) fill_certificate_caches(ctx);
    return rc;
}

int tls_context_build(const struct arbor_listener *listener, struct tls_context **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    const struct arbor_tls_settings *tls = &listener->tls;
    ERR_clear_error();
    struct tls_context *context = calloc(1, sizeof *context);
    SSL_CTX *ctx = context ? SSL_CTX_new(TLS_server_method()) : NULL;
    if (!ctx) {
        free(context);
        const struct arbor_place *at = tls->certfile.value ? &tls->certfile.at : &tls->psk_hint.at;
        return build_error(err, errlen, at, tls->certfile.value ? "certfile" : "psk_hint",
                           "cannot set up TLS");
    }
    if (tls_ssl_ctx_configure(ctx, listener, err, errlen) != 0) {
        SSL_CTX_free(ctx);
        free(context);
        return -1;
    }
    context->ssl_ctx = ctx;
    atomic_init(&context->refs, 1);
    *out = context;
    return 0;
}

/* The CA certificates a peer's certificate must chain to: the dialler's check of the broker
 * it dials (during the handshake) and the accepting side's of a peer (tls_certified_by). */
static int load_peer_cas(SSL_CTX *ctx, const struct arbor_tls_settings *tls, const char *prefix,
                         char *err, size_t errlen)
{
    char cafile[32], capath[32];
    directive_name(cafile, sizeof cafile, prefix, "cafile");
    directive_name(capath, sizeof capath, prefix, "capath");
    if (tls->cafile.value && SSL_CTX_load_verify_file(ctx, tls->cafile.value) != 1)
        return build_error(err, errlen, &tls->cafile.at, cafile,
                           "cannot load CA certificates from \"%s\"", tls->cafile.value);
    if (tls->capath.value && SSL_CTX_load_verify_dir(ctx, tls->capath.value) != 1)
        return build_error(err, errlen, &tls->capath.at, capath,
                           "cannot use \"%s\" as a directory of CA certificates",
                           tls->capath.value);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    return 0;
}

/* SSLKEYLOGFILE: the secrets of every TLS session this broker dials to a peer are appended
 * to the file it names, one line each in the NSS key log format Wireshark reads, so that a
 * capture of peer links can be decrypted (each link has one connection dialled from each
 * side). A debugging aid: the file decrypts the links, so it is created private (0600). The
 * variable is read at each handshake, the file opened and closed for each line. */
static void write_key_log(const SSL *ssl, const char *line)
{
    (void)ssl;
    const char *path = getenv("SSLKEYLOGFILE");
    if (!path || !*path) return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return;
    struct iovec iov[2] = {{(void *)line, strlen(line)}, {"\n", 1}};
    ssize_t written = writev(fd, iov, 2); /* a line lost is a debugging aid less */
    (void)written;
    close(fd);
}

/* ---- a client's pre-shared key, ALPN and OCSP stapling (bridges) ---- */

/* During the handshake: this side's identity and key. The server's hint (TLS 1.2 only) is
 * not consulted: a bridge has one key for its remote. In TLS 1.3 OpenSSL calls this too
 * (hint NULL), and the key is then used with a SHA-256 ciphersuite. */
static unsigned int psk_client_callback(SSL *ssl, const char *hint, char *identity,
                                        unsigned int max_identity_len, unsigned char *psk,
                                        unsigned int max_psk_len)
{
    (void)hint;
    const struct connection *conn = SSL_get_app_data(ssl);
    const struct tls_connection *t = conn ? conn->transport_data : NULL;
    const struct tls_context *context = t ? t->context : NULL;
    if (!context || !context->psk) return 0;
    size_t identity_len = strlen(context->psk_identity);
    if (identity_len >= max_identity_len || context->psk_len > max_psk_len) return 0;
    memcpy(identity, context->psk_identity, identity_len + 1);
    memcpy(psk, context->psk, context->psk_len);
    return (unsigned)context->psk_len;
}

/* The single response of basic that is about cert (issued by issuer), with the certificate
 * id computed by the digest the responder chose; NULL when there is none. */
static OCSP_SINGLERESP *ocsp_single_for(OCSP_BASICRESP *basic, X509 *cert, X509 *issuer)
{
    for (int i = 0; i < OCSP_resp_count(basic); i++) {
        OCSP_SINGLERESP *single = OCSP_resp_get0(basic, i);
        const OCSP_CERTID *theirs = OCSP_SINGLERESP_get0_id(single);
        ASN1_OBJECT *digest_id = NULL;
        OCSP_id_get0_info(NULL, &digest_id, NULL, NULL, (OCSP_CERTID *)theirs);
        const EVP_MD *digest = digest_id ? EVP_get_digestbyobj(digest_id) : NULL;
        OCSP_CERTID *ours = digest ? OCSP_cert_to_id(digest, cert, issuer) : NULL;
        bool same = ours && OCSP_id_cmp(ours, theirs) == 0;
        OCSP_CERTID_free(ours);
        if (same) return single;
    }
    return NULL;
}

/* How far a response's thisUpdate/nextUpdate may be off this host's clock (seconds). */
#define OCSP_CLOCK_SKEW_S 300

/* Why a successful response does not vouch for the server's certificate, or NULL when it
 * does: signed by its issuer (or a responder the issuer delegated to) as the CA certificates
 * of the context trust it, about this certificate, current, and "good". */
static const char *ocsp_basic_refusal(SSL *ssl, OCSP_BASICRESP *basic)
{
    STACK_OF(X509) *chain = SSL_get0_verified_chain(ssl); /* the server's first */
    X509 *cert = chain && sk_X509_num(chain) > 0 ? sk_X509_value(chain, 0) : NULL;
    if (!cert) return "no verified certificate to check the response against";
    X509 *issuer = sk_X509_num(chain) > 1 ? sk_X509_value(chain, 1) : cert;
    X509_STORE *store = SSL_CTX_get_cert_store(SSL_get_SSL_CTX(ssl));
    if (OCSP_basic_verify(basic, chain, store, 0) <= 0)
        return "the response is not signed by the certificate's issuer or its responder";
    OCSP_SINGLERESP *single = ocsp_single_for(basic, cert, issuer);
    if (!single) return "the response is not about the server's certificate";
    int reason;
    ASN1_GENERALIZEDTIME *revoked_at, *this_update, *next_update;
    int status = OCSP_single_get0_status(single, &reason, &revoked_at, &this_update, &next_update);
    if (OCSP_check_validity(this_update, next_update, OCSP_CLOCK_SKEW_S, -1) != 1)
        return "the response is out of date";
    if (status == V_OCSP_CERTSTATUS_REVOKED) return "the server's certificate is revoked";
    if (status != V_OCSP_CERTSTATUS_GOOD) return "the server's certificate has the status unknown";
    return NULL;
}

/* Why the handshake's stapled OCSP response is not good enough, or NULL when it is. */
static const char *ocsp_refusal(SSL *ssl)
{
    const unsigned char *der = NULL;
    long len = SSL_get_tlsext_status_ocsp_resp(ssl, &der);
    if (len <= 0 || !der) return "the server stapled no OCSP response";
    OCSP_RESPONSE *response = d2i_OCSP_RESPONSE(NULL, &der, len);
    if (!response) return "the stapled OCSP response cannot be read";
    OCSP_BASICRESP *basic = NULL;
    const char *why;
    if (OCSP_response_status(response) != OCSP_RESPONSE_STATUS_SUCCESSFUL)
        why = "the stapled OCSP response is the responder's error";
    else if (!(basic = OCSP_response_get1_basic(response)))
        why = "the stapled OCSP response cannot be read";
    else
        why = ocsp_basic_refusal(ssl, basic);
    OCSP_BASICRESP_free(basic);
    OCSP_RESPONSE_free(response);
    return why;
}

/* bridge_require_ocsp: OpenSSL calls this once the server's certificate has been verified
 * (TLS 1.2: after its flight; 1.3: after CertificateVerify); 0 ends the handshake. The reason
 * is kept for log_failure, OpenSSL's own being only "invalid status response". */
static int ocsp_status_callback(SSL *ssl, void *arg)
{
    (void)arg;
    const char *refusal = ocsp_refusal(ssl);
    ERR_clear_error();
    if (!refusal) return 1;
    struct connection *conn = SSL_get_app_data(ssl);
    struct tls_connection *t = conn ? conn->transport_data : NULL;
    if (t) t->ocsp_refusal = refusal;
    return 0;
}

/* The ALPN protocol offered (OpenSSL wants it with its length in front). */
static int offer_alpn(SSL_CTX *ctx, const struct arbor_setting *alpn, const char *prefix,
                      char *err, size_t errlen)
{
    char name[32];
    directive_name(name, sizeof name, prefix, "alpn");
    size_t len = strlen(alpn->value);
    unsigned char wire[256];
    if (len == 0 || len >= sizeof wire) /* the config parser allows 1 to 255 bytes */
        return build_error(err, errlen, &alpn->at, name, "a protocol name has 1 to 255 bytes");
    wire[0] = (unsigned char)len;
    memcpy(wire + 1, alpn->value, len);
    if (SSL_CTX_set_alpn_protos(ctx, wire, (unsigned)len + 1) != 0) /* 0 is success here */
        return build_error(err, errlen, &alpn->at, name, "cannot offer \"%s\"", alpn->value);
    return 0;
}

/* A pre-shared key instead of certificates: only ciphers authenticated by the key (TLS 1.2;
 * RSA-PSK would want a certificate), and no certificate accepted in its place (the context
 * has no CA certificates to check one against). */
static int use_psk(SSL_CTX *ctx, struct tls_context *context, const struct arbor_tls_settings *tls,
                   const char *prefix, char *err, size_t errlen)
{
    char name[32];
    directive_name(name, sizeof name, prefix, "psk");
    uint8_t key[PSK_KEY_MAX_BYTES];
    size_t len;
    const char *why;
    if (psk_key_from_hex(tls->psk.value, key, &len, &why) != 0)
        return build_error(err, errlen, &tls->psk.at, name, "%s", why);
    context->psk = OPENSSL_memdup(key, len);
    OPENSSL_cleanse(key, sizeof key);
    context->psk_len = len;
    context->psk_identity = strdup(tls->psk_identity.value);
    if (!context->psk || !context->psk_identity)
        return build_error(err, errlen, &tls->psk.at, name, "out of memory");
    if (SSL_CTX_set_cipher_list(ctx, "aPSK:!eNULL") != 1)
        return build_error(err, errlen, &tls->psk.at, name,
                           "no cipher for pre-shared keys in this OpenSSL");
    SSL_CTX_set_psk_client_callback(ctx, psk_client_callback);
    return 0;
}

/* What a client context has beyond certificates: ALPN, a pre-shared key, OCSP stapling. */
static int set_client_options(SSL_CTX *ctx, struct tls_context *context,
                              const struct arbor_tls_settings *tls, const char *prefix, char *err,
                              size_t errlen)
{
    if (tls->alpn.value && offer_alpn(ctx, &tls->alpn, prefix, err, errlen) != 0) return -1;
    if (tls->psk.value && use_psk(ctx, context, tls, prefix, err, errlen) != 0) return -1;
    if (tls->require_ocsp) {
        SSL_CTX_set_tlsext_status_type(ctx, TLSEXT_STATUSTYPE_ocsp);
        SSL_CTX_set_tlsext_status_cb(ctx, ocsp_status_callback);
    }
    return 0;
}

/* A client context: the CA certificates the server's certificate is checked against, this
 * side's certificate and key when given, the lowest TLS version, and a bridge's ALPN,
 * pre-shared key and OCSP stapling. prefix names the directives in errors ("peer_",
 * "bridge_"). */
static int client_context_build(const struct arbor_tls_settings *tls, const char *prefix,
                                struct tls_context **out, char *err, size_t errlen)
{
    *out = NULL;
    ERR_clear_error();
    struct tls_context *context = calloc(1, sizeof *context);
    SSL_CTX *ctx = context ? SSL_CTX_new(TLS_client_method()) : NULL;
    if (!ctx) {
        free(context);
        return build_error(err, errlen, &tls->cafile.at, "TLS", "cannot set up TLS");
    }
    context->ssl_ctx = ctx;
    atomic_init(&context->refs, 1);
    /* Every dial is a full handshake: a link is long-lived, and a resumed session would skip
     * the check of a certificate the CA may have replaced since. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (getenv("SSLKEYLOGFILE")) SSL_CTX_set_keylog_callback(ctx, write_key_log);
    int rc = set_protocol(ctx, tls, prefix, err, errlen);
    if (rc == 0 && tls->certfile.value) rc = load_certificate(ctx, tls, prefix, err, errlen);
    if (rc == 0) rc = load_peer_cas(ctx, tls, prefix, err, errlen);
    if (rc == 0) rc = set_client_options(ctx, context, tls, prefix, err, errlen);
    if (rc != 0) {
        tls_context_release(context);
        return -1;
    }
    *out = context;
    return 0;
}

int tls_peer_context_build(const struct arbor_tls_settings *tls, struct tls_context **out,
                           char *err, size_t errlen)
{
    return client_context_build(tls, "peer_", out, err, errlen);
}

int tls_bridge_context_build(const struct arbor_tls_settings *tls, struct tls_context **out,
                             char *err, size_t errlen)
{
    return client_context_build(tls, "bridge_", out, err, errlen);
}

struct tls_context *tls_context_ref(struct tls_context *context)
{
    if (context) atomic_fetch_add_explicit(&context->refs, 1, memory_order_relaxed);
    return context;
}

void tls_context_release(struct tls_context *context)
{
    if (!context || atomic_fetch_sub_explicit(&context->refs, 1, memory_order_acq_rel) > 1)
        return;
    SSL_CTX_free(context->ssl_ctx); /* connections still using it hold their own reference */
    OPENSSL_clear_free(context->psk, context->psk_len);
    free(context->psk_identity);
    free(context);
}

int tls_context_set_build(const struct arbor_config *cfg, struct tls_context_set **out,
                          void (*report)(void *ctx, const char *error), void *ctx)
{
    *out = NULL;
    struct tls_context_set *set = calloc(1, sizeof *set);
    if (!set || (cfg->listener_count &&
                 !(set->listeners = calloc(cfg->listener_count, sizeof *set->listeners)))) {
        free(set);
        report(ctx, "out of memory");
        return -1;
    }
    set->listener_count = cfg->listener_count;
    int status = 0;
    char err[2048];
    for (size_t i = 0; i < cfg->listener_count; i++) {
        const struct arbor_listener *listener = &cfg->listeners[i];
        if (!config_listener_uses_tls(listener)) continue;
        if (tls_context_build(listener, &set->listeners[i], err, sizeof err) != 0) {
            report(ctx, err);
            status = -1;
        }
    }
    if (config_peer_uses_tls(cfg) &&
        tls_peer_context_build(&cfg->peer_tls, &set->peer, err, sizeof err) != 0) {
        report(ctx, err);
        status = -1;
    }
    if (status != 0) {
        tls_context_set_free(set);
        return -1;
    }
    *out = set;
    return 0;
}

struct tls_context *tls_context_set_listener(const struct tls_context_set *set, size_t index)
{
    return set && index < set->listener_count ? set->listeners[index] : NULL;
}

void tls_context_set_free(struct tls_context_set *set)
{
    if (!set) return;
    for (size_t i = 0; i < set->listener_count; i++)
        tls_context_release(set->listeners[i]);
    tls_context_release(set->peer);
    free(set->listeners);
    free(set);
}

/* ---- pre-shared keys ---- */

/* During the handshake: the key of the identity the client names, from the psk_file that
 * applies to the listener now (a reload's new table serves the next handshake). */
static unsigned int psk_server_callback(SSL *ssl, const char *identity, unsigned char *psk,
                                        unsigned int max_psk_len)
{
    struct connection *conn = SSL_get_app_data(ssl);
    if (!conn || !identity || !conn->listener || !conn->listener->config) return 0;
    const struct arbor_security_settings *security =
        config_security_for(conn->broker->config, conn->listener->config);
    size_t len;
    const uint8_t *key = psk_table_find(security->psks, identity, &len);
    if (!key || len > max_psk_len) {
        log_debug("Client connection from %s: unknown PSK identity \"%s\".", conn->address,
                  identity);
        return 0;
    }
    struct tls_connection *t = conn->transport_data;
    free(t->psk_identity);
    t->psk_identity = strdup(identity);
    if (!t->psk_identity) return 0;
    memcpy(psk, key, len);
    return (unsigned)len;
}

/* ---- the transport ---- */

/* Log what OpenSSL says went wrong, in Mosquitto's words, and for a handshake the client's
 * address with the reason its certificate was refused, if it was. */
static void log_failure(const struct connection *conn, const struct tls_connection *t)
{
    char first[256] = "";
    char text[256];
    unsigned long e;
    for (int n = 0; (e = ERR_get_error()) != 0; n++) {
        ERR_error_string_n(e, text, sizeof text);
        log_error("OpenSSL Error[%d]: %s", n, text);
        if (n == 0) {
            const char *reason = ERR_reason_error_string(e);
            snprintf(first, sizeof first, "%s", reason ? reason : text);
        }
    }
    if (t->handshake_done) return;
    long verify = SSL_get_verify_result(t->ssl);
    if (t->client) { /* the certificate of the broker this one dialled */
        if (t->ocsp_refusal)
            log_notice("TLS connection to %s failed: OCSP: %s.", conn->address, t->ocsp_refusal);
        else if (verify != X509_V_OK)
            log_notice("TLS connection to %s failed: %s (%s).", conn->address,
                       first[0] ? first : "TLS handshake failed",
                       X509_verify_cert_error_string(verify));
        else
            log_notice("TLS connection to %s failed: %s.", conn->address,
                       first[0] ? first : "TLS handshake failed");
        return;
    }
    if (!conn->broker->config->connection_messages) return;
    if (verify != X509_V_OK)
        log_notice("Client connection from %s failed: %s (%s).", conn->address,
                   first[0] ? first : "TLS handshake failed", X509_verify_cert_error_string(verify));
    else
        log_notice("Client connection from %s failed: %s.", conn->address,
                   first[0] ? first : "TLS handshake failed");
}

/* An SSL call of recv (receiving) or send returned rc, which is not success: the answer
 * transport.h asks for, noting in t->blocked when the call must wait for the other
 * direction of the socket. */
static ssize_t io_failed(struct connection *conn, struct tls_connection *t, int rc,
                         bool receiving)
{
    int saved_errno = errno;
    switch (SSL_get_error(t->ssl, rc)) {
    case SSL_ERROR_WANT_READ:
        if (!receiving) t->blocked |= TRANSPORT_SEND_NEEDS_READ;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        if (receiving) t->blocked |= TRANSPORT_RECV_NEEDS_WRITE;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN: /* close_notify, or a plain close (IGNORE_UNEXPECTED_EOF) */
        if (receiving) return 0;
        errno = EPIPE;
        return -1;
    case SSL_ERROR_SYSCALL:
        t->failed = true;
        ERR_clear_error();
        errno = saved_errno ? saved_errno : ECONNRESET;
        return -1;
    default:
        t->failed = true;
        log_failure(conn, t);
        errno = EPROTO;
        return -1;
    }
}

static int tls_attach(struct connection *conn)
{
    struct tls_context *context = conn->listener->tls;
    struct tls_connection *t = calloc(1, sizeof *t);
    if (!t) return -1;
    ERR_clear_error();
    t->ssl = context ? SSL_new(context->ssl_ctx) : NULL;
    if (!t->ssl || SSL_set_fd(t->ssl, conn->handler.fd) != 1) {
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return -1;
    }
    SSL_set_accept_state(t->ssl);
    SSL_set_app_data(t->ssl, conn);
    conn->transport_data = t;
    return 0;
}

static ssize_t tls_recv(struct connection *conn, void *buf, size_t len)
{
    struct tls_connection *t = conn->transport_data;
    if (t->has_deferred) {
        t->has_deferred = false;
        errno = t->deferred_errno;
        return t->deferred_result;
    }
    t->blocked &= ~TRANSPORT_RECV_NEEDS_WRITE;
    if (!t->handshake_done) {
        ERR_clear_error();
        int rc = SSL_do_handshake(t->ssl);
        if (rc != 1) return io_failed(conn, t, rc, true);
        t->handshake_done = true;
        log_debug("TLS connection %s %s: %s, %s.", t->client ? "to" : "from", conn->address,
                  SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl));
    }
    /* As many records as fit: a short return then means the socket is drained. */
    size_t total = 0;
    while (total < len) {
        size_t got = 0;
        ERR_clear_error();
        if (SSL_read_ex(t->ssl, (char *)buf + total, len - total, &got) == 1) {
            total += got;
            continue;
        }
        ssize_t result = io_failed(conn, t, 0, true);
        if (total == 0) return result;
        if (result == 0 || errno != EAGAIN) {
            t->has_deferred = true;
            t->deferred_result = (int)result;
            t->deferred_errno = errno;
        }
        break;
    }
    return (ssize_t)total;
}

static ssize_t tls_send(struct connection *conn, const struct iovec *iov, int count)
{
    struct tls_connection *t = conn->transport_data;
    t->blocked &= ~TRANSPORT_SEND_NEEDS_READ;
    const void *data = iov[0].iov_base;
    size_t len = iov[0].iov_len;
    if (count > 1 && len < TRANSPORT_SEND_BUFFER) {
        /* Gather into one record. A retry after EAGAIN gathers the same bytes again, maybe
         * with more after them, which OpenSSL allows (ACCEPT_MOVING_WRITE_BUFFER). */
        uint8_t *buffer = conn->broker->send_buffer;
        size_t used = 0;
        for (int i = 0; i < count && used < TRANSPORT_SEND_BUFFER; i++) {
            size_t take = iov[i].iov_len;
            if (take > TRANSPORT_SEND_BUFFER - used) take = TRANSPORT_SEND_BUFFER - used;
            memcpy(buffer + used, iov[i].iov_base, take);
            used += take;
        }
        data = buffer;
        len = used;
    }
    size_t written = 0;
    ERR_clear_error();
    if (SSL_write_ex(t->ssl, data, len, &written) == 1) return (ssize_t)written;
    return io_failed(conn, t, 0, false);
}

static unsigned tls_blocked(const struct connection *conn)
{
    const struct tls_connection *t = conn->transport_data;
    return t ? t->blocked : 0;
}

static bool tls_ready(const struct connection *conn)
{
    const struct tls_connection *t = conn->transport_data;
    return t && t->handshake_done;
}

static size_t tls_pending(const struct connection *conn)
{
    const struct tls_connection *t = conn->transport_data;
    if (!t) return 0;
    /* A deferred end or error must be read too, or it would wait for a socket event. */
    return (size_t)SSL_pending(t->ssl) + (t->has_deferred ? 1 : 0);
}

/* The certificate's Common Name, refused when it holds a NUL (which would cut it short). */
static char *common_name(X509 *cert)
{
    X509_NAME *name = X509_get_subject_name(cert);
    int index = name ? X509_NAME_get_index_by_NID(name, NID_commonName, -1) : -1;
    X509_NAME_ENTRY *entry = index >= 0 ? X509_NAME_get_entry(name, index) : NULL;
    ASN1_STRING *data = entry ? X509_NAME_ENTRY_get_data(entry) : NULL;
    unsigned char *utf8 = NULL;
    int len = data ? ASN1_STRING_to_UTF8(&utf8, data) : -1;
    char *cn = NULL;
    if (len > 0 && !memchr(utf8, 0, (size_t)len)) cn = strndup((const char *)utf8, (size_t)len);
    OPENSSL_free(utf8);
    return cn;
}

/* The whole subject as RFC 2253 writes it ("CN=alice,O=Example,C=GB"), as Mosquitto does. */
static char *subject_text(X509 *cert)
{
    BIO *bio = BIO_new(BIO_s_mem());
    if (!bio) return NULL;
    char *text = NULL;
    if (X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) >= 0) {
        char *data = NULL;
        long len = BIO_get_mem_data(bio, &data);
        if (len > 0 && !memchr(data, 0, (size_t)len)) text = strndup(data, (size_t)len);
    }
    BIO_free(bio);
    return text;
}

char *tls_ssl_peer_name(const struct ssl_st *ssl, enum transport_name which)
{
    X509 *cert = ssl ? SSL_get1_peer_certificate(ssl) : NULL;
    if (!cert) return NULL;
    char *name = which == TRANSPORT_NAME_IDENTITY ? common_name(cert) : subject_text(cert);
    X509_free(cert);
    ERR_clear_error();
    return name;
}

static char *tls_peer_name(const struct connection *conn, enum transport_name which)
{
    const struct tls_connection *t = conn->transport_data;
    if (!t || !t->handshake_done) return NULL;
    if (which == TRANSPORT_NAME_IDENTITY && t->psk_identity) return strdup(t->psk_identity);
    return tls_ssl_peer_name(t->ssl, which);
}

/* The check is made again here, against the CA certificates of trust alone, because the
 * listener's cafile may hold more CAs than the one asked about (its clients' CA beside the
 * peers'). The handshake already proved that the other end holds the certificate's key. */
static bool tls_certified_by(const struct connection *conn, const struct tls_context *trust)
{
    const struct tls_connection *t = conn->transport_data;
    if (!t || !t->handshake_done || t->client || !trust) return false;
    X509 *cert = SSL_get0_peer_certificate(t->ssl);
    if (!cert || SSL_get_verify_result(t->ssl) != X509_V_OK) return false;
    /* the chain the client sent above its certificate: intermediates, untrusted */
    STACK_OF(X509) *chain = SSL_get_peer_cert_chain(t->ssl);
    X509_STORE_CTX *check = X509_STORE_CTX_new();
    bool trusted =
        check &&
        X509_STORE_CTX_init(check, SSL_CTX_get_cert_store(trust->ssl_ctx), cert, chain) == 1 &&
        X509_STORE_CTX_set_default(check, "ssl_client") == 1 && X509_verify_cert(check) == 1;
    if (!trusted && check)
        log_debug("Client certificate from %s does not chain to the CA asked for: %s.",
                  conn->address, X509_verify_cert_error_string(X509_STORE_CTX_get_error(check)));
    X509_STORE_CTX_free(check);
    ERR_clear_error();
    return trusted;
}

static void tls_close(struct connection *conn)
{
    struct tls_connection *t = conn->transport_data;
    if (!t) return;
    if (t->handshake_done && !t->failed) {
        ERR_clear_error();
        SSL_shutdown(t->ssl); /* close_notify if the socket takes it; never waited for */
    }
    ERR_clear_error();
    SSL_free(t->ssl);
    tls_context_release(t->context);
    free(t->psk_identity);
    free(t);
    conn->transport_data = NULL;
}

const struct transport transport_tls = {
    .name = "tls",
    .attach = tls_attach,
    .recv = tls_recv,
    .send = tls_send,
    .blocked = tls_blocked,
    .pending = tls_pending,
    .ready = tls_ready,
    .peer_name = tls_peer_name,
    .certified_by = tls_certified_by,
    .close = tls_close,
};

/* The name the dialled broker's certificate must carry: an address literal is matched against
 * its IP subjectAltNames, a host name against its DNS names (or its CN without them), and is
 * also sent as SNI. */
static int expect_server_name(SSL *ssl, const char *server_name)
{
    X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
    if (X509_VERIFY_PARAM_set1_ip_asc(param, server_name) == 1) return 0;
    ERR_clear_error();
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (SSL_set1_host(ssl, server_name) != 1) return -1;
    return SSL_set_tlsext_host_name(ssl, server_name) == 1 ? 0 : -1;
}

int transport_tls_attach_client(struct connection *conn, struct tls_context *context,
                                const char *server_name)
{
    struct tls_connection *t = calloc(1, sizeof *t);
    if (!t) return -1;
    ERR_clear_error();
    t->ssl = context ? SSL_new(context->ssl_ctx) : NULL;
    if (!t->ssl || SSL_set_fd(t->ssl, conn->handler.fd) != 1 ||
        (server_name && expect_server_name(t->ssl, server_name) != 0)) {
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return -1;
    }
    SSL_set_connect_state(t->ssl);
    SSL_set_app_data(t->ssl, conn);
    t->client = true;
    t->context = tls_context_ref(context);
    /* The client speaks first: recv, which runs the handshake, needs a writable socket. */
    t->blocked = TRANSPORT_RECV_NEEDS_WRITE;
    conn->transport = &transport_tls;
    conn->transport_data = t;
    return 0;
}
