// Test-only: replaces every global operator new / delete of the program that includes it (one
// translation unit per program) so a test can count heap allocations: g_news.  All variants are
// replaced together so that allocation and release always match (AddressSanitizer checks it).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

inline size_t g_news = 0;

static void *counted_alloc(size_t n, size_t align) {
    g_news++;
    void *p =
        align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align) : std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    return p;
}
void *operator new(size_t n) { return counted_alloc(n, 0); }
void *operator new[](size_t n) { return counted_alloc(n, 0); }
void *operator new(size_t n, std::align_val_t a) { return counted_alloc(n, size_t(a)); }
void *operator new[](size_t n, std::align_val_t a) { return counted_alloc(n, size_t(a)); }
void *operator new(size_t n, const std::nothrow_t &) noexcept {
    try {
        return counted_alloc(n, 0);
    } catch (...) {
        return nullptr;
    }
}
void *operator new[](size_t n, const std::nothrow_t &) noexcept {
    try {
        return counted_alloc(n, 0);
    } catch (...) {
        return nullptr;
    }
}
void operator delete(void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, size_t) noexcept { std::free(p); }
void operator delete[](void *p, size_t) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, size_t, std::align_val_t) noexcept { std::free(p); }
