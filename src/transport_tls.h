/*
 * transport_tls.h: TLS on listeners. A listener whose directives ask for TLS (certfile and
 * keyfile, or psk_hint) gets a context built from them: one OpenSSL SSL_CTX per listener,
 * built again from the files on every reload, shared by reference with the connections it
 * accepted. Its connections use transport_tls (transport.h).
 */
#ifndef ARBOR_TRANSPORT_TLS_H
#define ARBOR_TRANSPORT_TLS_H

#include <stddef.h>

#include "transport.h"

struct arbor_listener;
struct tls_context;
struct ssl_ctx_st; /* OpenSSL's SSL_CTX */
struct ssl_st;     /* OpenSSL's SSL */

/* Build the context of a listener that uses TLS (config_listener_uses_tls): read its
 * certificate chain, private key (which must match), CA certificates, CRL and DH parameters,
 * and apply tls_version, ciphers, require_certificate and psk_hint. Returns 0 and *out (one
 * reference), or -1 with "file:line: directive: what is wrong" in err. Never logs. */
int tls_context_build(const struct arbor_listener *listener, struct tls_context **out, char *err,
                      size_t errlen);

/* Apply a listener's TLS directives to an SSL_CTX made by someone else: what
 * tls_context_build does to its own. libwebsockets' vhost of a wss listener is set up with it
 * (websocket.c), so wss and TLS listeners read the same directives the same way. Returns 0, or
 * -1 with "file:line: directive: what is wrong" in err. Never logs. */
int tls_ssl_ctx_configure(struct ssl_ctx_st *ctx, const struct arbor_listener *listener, char *err,
                          size_t errlen);

/* The client certificate's Common Name or subject (transport.h, peer_name) of a connection
 * whose handshake is done, as a new string; NULL without a certificate. */
char *tls_ssl_peer_name(const struct ssl_st *ssl, enum transport_name which);

/* Take another reference; returns context (NULL stays NULL). */
struct tls_context *tls_context_ref(struct tls_context *context);
/* Drop a reference (NULL is fine); the last one frees the context. Connections accepted with
 * it keep it alive on their own (OpenSSL's reference), so a reload may drop it at once. */
void tls_context_release(struct tls_context *context);

#endif
