// Compiles nothing itself: the target that builds the precompiled header (cmake/sandfort.cmake).
