// The module is its header: LLVMFuzzerRunDriver is libFuzzer's.
#include "CFuzzer.h"
