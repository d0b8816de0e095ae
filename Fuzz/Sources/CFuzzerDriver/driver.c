// Only the declaration in include/CFuzzerDriver.h matters; SwiftPM wants a C target to have a source file.
#include "CFuzzerDriver.h"
