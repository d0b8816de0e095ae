internal import COpenSSL
import Synchronization

/// Which upstream TLS connections ended with the server's close_notify. A close-delimited body (HTTP/1.x without
/// Content-Length or chunked) ends where the connection does, and over TLS only close_notify tells that end from a
/// TCP close anyone on the path can forge (RFC 8446 §6.1, RFC 9112 §9.8). libcurl 7.88 takes either for a clean end
/// (its SSL_ERROR_SYSCALL reads as EOF outside debug builds), so hookproxy handed on a truncated body as whole.
///
/// A transfer whose response turns out close-delimited asks the ledger to watch its connection (`expect`, with the
/// connection's `SSL *`); OpenSSL's info callback, set on every upstream SSL_CTX (`watch`), marks a watched
/// connection once it reads close_notify, and the transfer asks when it ends (`take`), or is forgotten when it goes
/// (`forget`: cancelled). All of it on the transfer's event loop, inside curl; the ledger is shared by the loops and
/// holds one entry per such transfer under way. A connection it does not know is never reported as truncated.
enum CloseNotifyLedger {
    private static let watched = Mutex<[UInt: Bool]>([:])

    /// Makes connections made with `context` (an `SSL_CTX *`) report their close_notify.
    static func watch(_ context: OpaquePointer) {
        hp_SSL_CTX_set_info_callback(context) { ssl, whereFlags, alert in
            guard whereFlags & hp_ssl_cb_read_alert() == hp_ssl_cb_read_alert(), alert & 0xFF == hp_ssl_ad_close_notify(),
                  let ssl else { return }
            CloseNotifyLedger.received(UInt(bitPattern: ssl))
        }
    }

    /// A body that ends with `connection` (an `SSL *`) is under way: its close_notify is to be noted.
    static func expect(_ connection: UInt) {
        watched.withLock { $0[connection] = false }
    }

    static func received(_ connection: UInt) {
        watched.withLock { table in
            if table[connection] != nil { table[connection] = true }
        }
    }

    /// Whether `connection` received close_notify since `expect` (nil: not watched); forgets it.
    static func take(_ connection: UInt) -> Bool? {
        watched.withLock { $0.removeValue(forKey: connection) }
    }

    /// The transfer watching `connection` went without asking (cancelled).
    static func forget(_ connection: UInt) {
        watched.withLock { _ = $0.removeValue(forKey: connection) }
    }
}
