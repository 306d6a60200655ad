//! docpipe: export documentation page views (human vs AI) to Parquet, and more.

pub mod alloc;
pub mod api;
pub mod cli;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod emulator;
pub mod export;
pub mod progress;
pub mod random;
pub mod ratelimit;
pub mod rules;
pub mod trends;
