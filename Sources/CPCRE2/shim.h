// PCRE2's 8-bit library (UTF-8 subjects), for the rules' regular expressions. Only Sources/ProxyRules/PCRE2 imports
// it. The code-unit width picks the pcre2_*_8 names behind pcre2.h's generic ones; the option and error constants are
// macros, most of them casts Swift does not import, so they sit behind accessors.
#ifndef HOOKPROXY_CPCRE2_SHIM_H
#define HOOKPROXY_CPCRE2_SHIM_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <stddef.h>
#include <stdint.h>
#include <pcre2.h>

/// UTF-8 patterns and subjects, Unicode properties for \w \d \b and case, no check of subjects (callers validate).
/// No `\C`: it matches one byte of a multi-byte character, so a match could end inside one.
static inline uint32_t hp_pcre2_compile_options(void) { return PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C; }
static inline uint32_t hp_pcre2_no_utf_check(void) { return PCRE2_NO_UTF_CHECK; }
static inline uint32_t hp_pcre2_jit_complete(void) { return PCRE2_JIT_COMPLETE; }
static inline uint32_t hp_pcre2_newline_any(void) { return PCRE2_NEWLINE_ANY; }
static inline uint32_t hp_pcre2_info_capturecount(void) { return PCRE2_INFO_CAPTURECOUNT; }
static inline size_t hp_pcre2_unset(void) { return PCRE2_UNSET; }

static inline int hp_pcre2_error_nomatch(void) { return PCRE2_ERROR_NOMATCH; }
/// The JIT code's stack (32 KiB of the machine stack unless one is assigned) was too small for the match.
static inline int hp_pcre2_error_jit_stacklimit(void) { return PCRE2_ERROR_JIT_STACKLIMIT; }
/// Whether a match failed for running out of one of its budgets rather than for not matching.
static inline int hp_pcre2_is_limit_error(int code) {
    return code == PCRE2_ERROR_MATCHLIMIT || code == PCRE2_ERROR_DEPTHLIMIT || code == PCRE2_ERROR_HEAPLIMIT
        || code == PCRE2_ERROR_JIT_STACKLIMIT || code == PCRE2_ERROR_NOMEMORY;
}

#endif
