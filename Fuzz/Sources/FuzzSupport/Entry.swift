import CFuzzerDriver

/// Runs libFuzzer on `callback` with the process's arguments.
///
/// Why this exists: SwiftPM links a debug executable with `--defsym main=<module>_main` (so that tests can link
/// the executable's code). A fuzz target has no Swift `main` (`-parse-as-library`; libFuzzer brings its own), so
/// each target defines `<module>_main` with `@_cdecl` and calls this, which hands over to libFuzzer's driver.
/// When SwiftPM does not rename `main` (release builds), libFuzzer's `main` is linked and this is never called.
public func runLibFuzzer(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt {
    var argc = argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = argv
    return LLVMFuzzerRunDriver(&argc, &argv, callback)
}
