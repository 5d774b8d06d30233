/*
 * transport_tls.h: TLS on listeners. A listener whose directives ask for TLS (certfile and
 * keyfile, or psk_hint) gets a context built from them: one OpenSSL SSL_CTX per listener,
 * built again from the files on every reload, shared by reference with the connections it
 * accepted. Its connections use transport_tls (transport.h). Peer links over TLS have one
 * client context, built the same way from the peer_* directives, and each TLS bridge one from
 * its bridge_* directives.
 */
#ifndef ARBOR_TRANSPORT_TLS_H
#define ARBOR_TRANSPORT_TLS_H

#include <stddef.h>

#include "transport.h"

struct arbor_config;
struct arbor_listener;
struct arbor_tls_settings;
struct connection;
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

/* Build the client context of peer links from the peer_* directives (config.h, peer_tls):
 * this broker's certificate and key, the peer CA certificates (peer_cafile, peer_capath) the
 * dialled broker's certificate is checked against, peer_tls_version and peer_ciphers. The
 * same CA certificates decide which incoming peers are accepted (the certified_by callback of
 * transport.h). Returns 0 and *out (one reference), or -1 with "file:line: directive: what is
 * wrong" in err. Never logs. */
int tls_peer_context_build(const struct arbor_tls_settings *tls, struct tls_context **out,
                           char *err, size_t errlen);

/* The client context of a bridge: bridge_cafile or bridge_capath, bridge_certfile and
 * bridge_keyfile when given, or instead bridge_identity and bridge_psk (TLS with a pre-shared
 * key: PSK ciphers only, no certificate accepted); bridge_tls_version, bridge_alpn and
 * bridge_require_ocsp (a handshake without a good stapled OCSP response for the server's
 * certificate fails, its reason logged). Returns 0 and *out (one reference), or -1 with
 * "file:line: directive: what is wrong" in err. Never logs. */
int tls_bridge_context_build(const struct arbor_tls_settings *tls, struct tls_context **out,
                             char *err, size_t errlen);

/* Make conn, just dialled (connection_dial) and still connecting, a TLS client on context
 * (which it holds a reference to until it closes): the handshake starts once the TCP
 * connection is up, and the role's on_active waits for its end. The server's certificate
 * must chain to the context's CA certificates and name server_name (an IP subjectAltName for
 * an address, a DNS name for a host name; NULL: any name, bridge_insecure). Returns 0, or -1
 * (out of memory, or a name OpenSSL refuses): conn keeps its TCP transport. */
int transport_tls_attach_client(struct connection *conn, struct tls_context *context,
                                const char *server_name);

/* The TLS contexts one configuration needs, built from its files by the daemon: one per
 * entry of cfg->listeners (NULL where the listener has no TLS of its own), and the peer links'
 * client context (NULL without peer TLS). The broker holds the set of the configuration in
 * force (broker.h); a reload builds a new set before it applies anything, so a certificate or
 * key that fails to load keeps the old configuration and its set. */
struct tls_context_set {
    struct tls_context **listeners;
    size_t listener_count;
    struct tls_context *peer;
};

/* Build cfg's set into *out (a new allocation). Each failure is reported through report(ctx,
 * "file:line: directive: what is wrong") and every context is still tried, so that one start
 * names every bad file. Returns 0, or -1 with *out NULL after at least one report. */
int tls_context_set_build(const struct arbor_config *cfg, struct tls_context_set **out,
                          void (*report)(void *ctx, const char *error), void *ctx);
/* The context of cfg->listeners[index] in set (no new reference); NULL for none. */
struct tls_context *tls_context_set_listener(const struct tls_context_set *set, size_t index);
/* Drop the set's references and free it (NULL is fine). */
void tls_context_set_free(struct tls_context_set *set);

/* Take another reference; returns context (NULL stays NULL). */
struct tls_context *tls_context_ref(struct tls_context *context);
/* Drop a reference (NULL is fine); the last one frees the context. Connections accepted with
 * it keep it alive on their own (OpenSSL's reference), so a reload may drop it at once. */
void tls_context_release(struct tls_context *context);

#endif
