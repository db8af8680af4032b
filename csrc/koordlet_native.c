#include "koordlet_native.h"

int kn_abi_version(void) { return 1; }
