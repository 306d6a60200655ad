//! The one integration test binary: each module covers one part of docpipe.

mod common;
mod emulator;
