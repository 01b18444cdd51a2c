// Whether this test binary was built with AddressSanitizer or ThreadSanitizer. Tests use it
// where a sanitizer changes what they can observe (a process's exit status, resident memory,
// spare file descriptors), never to skip a check without saying why at the use.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CALRT_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CALRT_TEST_SANITIZED 1
#endif
#endif

namespace calrt_test {
#if defined(CALRT_TEST_SANITIZED)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
}  // namespace calrt_test
