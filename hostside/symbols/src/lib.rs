//! Symbolization for crossprof.
