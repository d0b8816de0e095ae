#ifndef HOOKPROXY_CFUZZERDRIVER_H
#define HOOKPROXY_CFUZZERDRIVER_H
#include <stddef.h>
#include <stdint.h>

/// libFuzzer's own driver (in clang's libclang_rt.fuzzer, linked by -sanitize=fuzzer): parses libFuzzer's flags
/// from argv and fuzzes `callback`. See FuzzSupport/Entry.swift for why the targets call it themselves.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
