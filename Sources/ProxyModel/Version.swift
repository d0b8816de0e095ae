/// hookproxy's version, shown by `--version`, the onboarding page and the HAR creator.
public enum HookproxyVersion {
    public static let current = "0.1.0"
}
