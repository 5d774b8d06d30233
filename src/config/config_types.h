/*
 * config_types.h: the small value types the config is made of (where a directive was given,
 * a text setting with its place, TLS settings), apart from config.h so that the parsers of
 * parts of the config (bridge_config.c) can use them without the whole of it.
 */
#ifndef ARBOR_CONFIG_TYPES_H
#define ARBOR_CONFIG_TYPES_H

#include <stdbool.h>

/* Where a directive was given (file NULL: not given), for checks made once the whole config
 * is read. */
struct arbor_place {
    const char *file; /* owned by arbor_config.source_files */
    int line;
};

/* A directive's text value (NULL: not given) and where it was given. */
struct arbor_setting {
    char *value;
    struct arbor_place at;
};

/* The lowest TLS version a listener accepts (tls_version); the highest is always TLS 1.3. */
enum arbor_tls_version {
    ARBOR_TLS_V1_2 = 0, /* the default */
    ARBOR_TLS_V1_1,
    ARBOR_TLS_V1_3,
};

/* A listener's TLS (mosquitto.conf(5), "Certificate based SSL/TLS Support" and
 * "Pre-shared-key based SSL/TLS Support"): the listener speaks TLS when certfile and keyfile,
 * or psk_hint, are given (config_listener_uses_tls). Paths are absolute (a relative one is
 * taken from base_dir). The files are read by the daemon after parsing (transport_tls.c),
 * which keeps parsing pure and lets a reload read them again. Peer links and bridges keep
 * their client side in the same struct; the last block is a bridge's alone. */
struct arbor_tls_settings {
    struct arbor_setting cafile, capath, certfile, keyfile, crlfile, dhparamfile;
    struct arbor_setting ciphers;       /* TLS 1.2 and earlier: an OpenSSL cipher list */
    struct arbor_setting ciphers_tls13; /* ciphers_tls1.3: OpenSSL TLS 1.3 ciphersuites */
    struct arbor_setting psk_hint;      /* given: pre-shared keys (psk_file) are accepted */
    enum arbor_tls_version min_version;
    bool require_certificate;
    bool use_identity_as_username;
    bool use_subject_as_username;
    struct arbor_place require_certificate_at, use_identity_at, use_subject_at;
    /* the first directive given for this listener that only means something with TLS */
    const char *needs_tls_directive;
    struct arbor_place needs_tls_at;
    /* A bridge's (the dialling side): bridge_alpn, the protocol offered; bridge_identity and
     * bridge_psk (hexadecimal, psk_file's reading), TLS with a pre-shared key instead of
     * certificates; bridge_require_ocsp, a good stapled OCSP response for the remote's
     * certificate in every handshake. */
    struct arbor_setting alpn, psk_identity, psk;
    bool require_ocsp;
    struct arbor_place require_ocsp_at;
};

#endif
