import Glibc

/// Skips GnuTLS's load-time initialization, which hookproxy never needs, by starting the binary once more.
///
/// Debian's libcurl (its OpenSSL flavour, which hookproxy uses) links libldap and librtmp, and both link GnuTLS.
/// GnuTLS initializes itself, and p11-kit with it, in a constructor that runs as the library loads, before `main`,
/// unless `GNUTLS_NO_IMPLICIT_INIT` is set: about 0.8 MiB of resident pages, a quarter of hookproxy's own, for a
/// library no code of hookproxy's or curl's calls (LDAP and RTMP URLs are refused). So at start, when the variable is
/// not set, hookproxy sets it and executes itself again (same process, same arguments: `/proc/self/exe`); the new
/// image clears the variable again, so that nothing hookproxy starts inherits it. If the user set the variable, the
/// binary was started through the loader (`ld.so hookproxy …`), or the exec fails (no `/proc`), hookproxy goes on
/// as it is.
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
        // Only when the kernel started this binary itself, with the loader as its interpreter (AT_BASE, where the
        // loader sits, is then set): started as `ld.so hookproxy …`, `/proc/self/exe` is the loader, which the
        // program's own arguments would not name (a review's find: it ran `ld.so run`).
        guard loaderBase() != 0 else { return }
        setenv(variable, "1", 1)
        setenv(marker, "1", 1)
        execv("/proc/self/exe", CommandLine.unsafeArgv)
        unsetenv(marker)  // (the exec failed: this image goes on, with GnuTLS initialized)
        unsetenv(variable)
    }

    /// The process's AT_BASE (where the kernel put the program's interpreter; 0 when the kernel started the loader
    /// itself, or on a read error), from `/proc/self/auxv`: pairs of native words, type and value.
    private static func loaderBase() -> UInt {
        let atBase: UInt = 7
        let descriptor = open("/proc/self/auxv", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return 0 }
        defer { close(descriptor) }
        var words = [UInt](repeating: 0, count: 128)
        let count = words.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return 0 }
        let pairs = count / (2 * MemoryLayout<UInt>.size)
        for pair in 0..<pairs where words[2 * pair] == atBase { return words[2 * pair + 1] }
        return 0
    }
}
