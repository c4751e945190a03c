#ifndef CFUZZER_H
#define CFUZZER_H

#include <stddef.h>
#include <stdint.h>

// libFuzzer's driver, called from a program's own main (libFuzzer's own `main` is not linked:
// SwiftPM gives every executable target a main that calls the target's @main). Only a build
// with `-sanitize=fuzzer` links it.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
