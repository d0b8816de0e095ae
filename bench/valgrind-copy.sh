# shellcheck shell=bash
# Sourced by the scripts that run hookproxy under valgrind. `valgrind_copy BINARY DIR` writes DIR/hookproxy and
# DIR/sigsuspend-copy.so; run `LD_PRELOAD=DIR/sigsuspend-copy.so valgrind ... DIR/hookproxy ...`.
#
# Valgrind 3.19 gives up on the DWARF 5 the toolchain's clang writes for the C targets (BoringSSL): it runs a copy
# without debug sections. The symbol table stays, and callgrind counts per function from it.
# Valgrind 3.19's rt_sigsuspend wrapper deletes its own signal from the mask it is given, writing into the caller's
# memory; libdispatch's main thread (dispatch_main) passes a `static const` mask in .rodata, and valgrind dies with
# SIGSEGV as the proxy starts. A preloaded sigsuspend passes a copy on the stack (called once, at start-up).
valgrind_copy() {
  local binary=$1 dir=$2
  objcopy --strip-debug "$binary" "$dir/hookproxy"
  cat >"$dir/sigsuspend-copy.c" <<'CEOF'
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, _NSIG / 8);
}
CEOF
  "${CC:-cc}" -O2 -shared -fPIC -o "$dir/sigsuspend-copy.so" "$dir/sigsuspend-copy.c"
}
