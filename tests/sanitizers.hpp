// ATTNLAB_UNDER_ASAN: 1 when the test is built with AddressSanitizer (the fuzz preset's
// build-fuzz/, the asan preset), whose allocator keeps its own books, so that malloc's
// statistics mean nothing; tests that read them skip, saying so. GCC says AddressSanitizer
// is on with __SANITIZE_ADDRESS__, clang (14) only through __has_feature. The fuzz preset
// compiles the tests' own code without the sanitizers (ATTNLAB_TESTS_UNSANITIZED) against the
// sanitized library and command, and defines it as 1 itself.
#pragma once

#ifdef ATTNLAB_UNDER_ASAN
#elif defined(__SANITIZE_ADDRESS__)
#define ATTNLAB_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTNLAB_UNDER_ASAN 1
#endif
#endif
#ifndef ATTNLAB_UNDER_ASAN
#define ATTNLAB_UNDER_ASAN 0
#endif
