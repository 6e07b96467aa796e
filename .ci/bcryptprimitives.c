/* Copied from the project's shared tooling (tools/xplat/prng.c) so that CI,
 * which runs on a clean clone, can build it: .ci/windows compiles it with
 * mingw-w64 into the wine prefix's system32. Project tooling, under the
 * project's licence (MIT). */
/* Stand-in for Windows 10's bcryptprimitives.dll (absent from Wine 8.0):
   Rust's std (>= 1.78) imports ProcessPrng from it for HashMap seeds etc. */
#include <windows.h>
#include <bcrypt.h>
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (BCryptGenRandom(NULL, data, n, BCRYPT_USE_SYSTEM_PREFERRED_RNG) != 0) return FALSE;
        data += n; len -= n;
    }
    return TRUE;
}
