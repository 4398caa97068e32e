#include "core/test_fault.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace stk {

namespace {
std::mutex g_mu;
bool g_read = false;
std::string g_fault;
}  // namespace

bool test_fault(const char *name) {
    std::lock_guard<std::mutex> l(g_mu);
    if (!g_read) {
        const char *e = std::getenv("STK_TEST_FAULT");
        g_fault = e ? e : "";
        g_read = true;
    }
    return !g_fault.empty() && g_fault == name;
}

void set_test_fault(const char *name) {
    std::lock_guard<std::mutex> l(g_mu);
    g_read = true;
    g_fault = name ? name : "";
}

}  // namespace stk
