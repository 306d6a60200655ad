//! docpipe: export documentation page views (human vs AI) to Parquet, and more.

pub mod cli;
pub mod clock;
pub mod emulator;
pub mod ratelimit;
