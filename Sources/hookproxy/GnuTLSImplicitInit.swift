import Glibc

/// Skips GnuTLS's load-time initialization, which hookproxy never needs, by starting the binary once more.
///
/// Debian's libcurl (its OpenSSL flavour, which hookproxy uses) links libldap and librtmp, and both link GnuTLS.
/// GnuTLS initializes itself, and p11-kit with it, in a constructor that runs as the library loads, before `main`,
/// unless `GNUTLS_NO_IMPLICIT_INIT` is set: about 0.8 MiB of resident pages, a quarter of hookproxy's own, for a
/// library no code of hookproxy's or curl's calls (LDAP and RTMP URLs are refused). So at start, when the variable is
/// not set, hookproxy sets it and executes itself again (same process, same arguments: `/proc/self/exe`); the new
/// image clears the variable again, so that nothing hookproxy starts inherits it. If the user set the variable, or
/// the exec fails (no `/proc`), hookproxy goes on as it is.
enum GnuTLSImplicitInit {
    static let variable = "GNUTLS_NO_IMPLICIT_INIT"
    /// Set beside `variable` by the first image, so that the second knows the variable is hookproxy's.
    static let marker = "HOOKPROXY_SKIPPED_GNUTLS_INIT"

    /// Call first thing in `main`; returns in the image that goes on (the exec does not return when it works).
    static func skip() {
        if getenv(variable) != nil {
            if getenv(marker) != nil {
                unsetenv(marker)
                unsetenv(variable)
            }
            return
        }
        setenv(variable, "1", 1)
        setenv(marker, "1", 1)
        execv("/proc/self/exe", CommandLine.unsafeArgv)
        unsetenv(marker)  // (the exec failed: this image goes on, with GnuTLS initialized)
        unsetenv(variable)
    }
}
