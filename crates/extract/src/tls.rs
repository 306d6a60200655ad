//! TLS: rustls on ring, the one back end of every client (the service's, the alerts' webhook,
//! object storage's), so that aws-lc's C is never built.

/// Makes ring the process's rustls provider, before any client is built (once; a provider
/// already installed stays).
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
